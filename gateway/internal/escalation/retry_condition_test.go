package escalation

import (
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestDBCondition: the retry log names what is wrong with the database
// (a full disk is not "unreachable").
func TestDBCondition(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("reading: %w", &pgconn.PgError{Code: "53100"}), "database disk full (SQLSTATE 53100)"},
		{&pgconn.PgError{Code: "57P03"}, "database unreachable (SQLSTATE 57P03)"},
		{&pgconn.ConnectError{}, "database unreachable"},
		{errors.New("broken pipe"), "database unreachable"},
	} {
		if got := dbCondition(tt.err); got != tt.want {
			t.Errorf("dbCondition(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
}
