module ironcurtain.dev/agent

go 1.26.0
