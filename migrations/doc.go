// Package migrations embeds the numbered SQL migrations of the gateway's
// Postgres schema (NNNN_name.up.sql / NNNN_name.down.sql).
package migrations
