package stack

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
)

// SQL runs a query with psql in the Postgres container (the database is on
// an internal network the host cannot reach) and returns its unaligned,
// tuples-only output.
func (s *Stack) SQL(ctx context.Context, query string) (string, error) {
	r, err := execIn(ctx, s.cli, s.Postgres.ID,
		[]string{"psql", "-X", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1", "-U", dbUser, "-d", dbName, "-At", "-c", query},
		[]string{"PGPASSWORD=" + s.Secrets.DBPassword}, nil)
	if err != nil {
		return "", err
	}
	if r.Code != 0 {
		return "", fmt.Errorf("psql: %s", r)
	}
	return strings.TrimSpace(r.Stdout), nil
}

// QueryJSON runs query (a SELECT) and decodes its rows, as a JSON array of
// objects keyed by column name, into out.
func (s *Stack) QueryJSON(ctx context.Context, query string, out any) error {
	res, err := s.SQL(ctx, "SELECT coalesce(json_agg(q), '[]'::json) FROM ("+query+") q")
	if err != nil {
		return err
	}
	if err := json.Unmarshal([]byte(res), out); err != nil {
		return fmt.Errorf("decoding rows of %q: %w", query, err)
	}
	return nil
}

// Quote returns s as a SQL string literal.
func Quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
