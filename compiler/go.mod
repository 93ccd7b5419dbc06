module ironcurtain.dev/compiler

go 1.26.0
