// Package migrations embeds the numbered SQL migrations of the gateway's
// Postgres schema (sql/NNNN_name.up.sql and sql/NNNN_name.down.sql), lists
// them in order and checks their names (versions 1..N without gaps, both
// directions present). It only reads the embedded files: applying them (with
// golang-migrate), the version table and its dirty flag live in the gateway's
// store package, driven by `ironcurtain migrate up|down|status|force`.
package migrations
