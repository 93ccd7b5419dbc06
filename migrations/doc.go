// Package migrations embeds the numbered SQL migrations of the gateway's
// Postgres schema (sql/NNNN_name.up.sql and sql/NNNN_name.down.sql) and lists
// them in order. It only reads the embedded files: applying them, the version
// table and its dirty flag live in the gateway's store package, driven by
// `ironcurtain migrate up|down|status`.
package migrations
