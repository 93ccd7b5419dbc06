module ironcurtain.dev/migrations

go 1.26.0
