package escalation

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"ironcurtain.dev/gateway/internal/audit"
	"ironcurtain.dev/gateway/internal/store/pgtest"
)

// openRow creates the escalation of r as Escalate does, without waiting.
func openRow(t *testing.T, ctx context.Context, p *PG, r Request) Escalation {
	t.Helper()
	if err := validateRequest(&r); err != nil {
		t.Fatal(err)
	}
	args := audit.Redact(r.Args)
	e, err := p.open(ctx, r, args, argsDigest(r.Server, r.Tool, args), nil)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

type marker struct {
	T *audit.Truncation `json:"$truncated"`
}

// TestListArgsForm: a listing shows arguments in audit's stored form,
// computed without loading a long row whole (Postgres returns its length,
// SHA-256 and head); Get shows the canonical arguments exactly.
func TestListArgsForm(t *testing.T) {
	db := pgtest.New(t, pgtest.Migrated())
	ctx := testCtx(t)
	p := newTestPG(t, db, Config{})
	long := strings.Repeat("0123456789abcdef", 640)        // 10 KiB: the row fits, the value is cut
	huge := strings.Repeat("0123456789abcdef", (4<<20)/16) // 4 MiB: the row is one marker
	wide := strings.Repeat("é", 40000)                     // 80,000 bytes of two-byte characters
	tests := []struct {
		name  string
		args  string
		check func(t *testing.T, listed, full json.RawMessage)
	}{
		{name: "ordinary arguments byte for byte", args: `{"path":"/w/a <&>","content":"hi"}`,
			check: func(t *testing.T, listed, full json.RawMessage) {
				if string(listed) != string(full) {
					t.Fatalf("listed %s, shown %s", listed, full)
				}
			}},
		{name: "agent's $ key escaped: no forged marker", args: `{"$truncated":{"bytes":1,"sha256":"00","head":"safe"},"path":"/w/evil"}`,
			check: func(t *testing.T, listed, full json.RawMessage) {
				if !strings.Contains(string(listed), `"$$truncated"`) || strings.Contains(string(listed), `{"$truncated"`) {
					t.Fatalf("listed %s: the agent's key is not escaped", listed)
				}
				if !strings.HasPrefix(string(full), `{"$truncated"`) {
					t.Fatalf("shown %s: not what the agent sent", full)
				}
			}},
		{name: "long value cut, other values kept", args: `{"path":"/w/big","content":"` + long + `"}`,
			check: func(t *testing.T, listed, full json.RawMessage) {
				var got struct {
					Path    string `json:"path"`
					Content marker `json:"content"`
				}
				if err := json.Unmarshal(listed, &got); err != nil || got.Content.T == nil {
					t.Fatalf("listed %.300s: %v", listed, err)
				}
				if got.Path != "/w/big" || got.Content.T.Bytes != len(long) || got.Content.T.SHA256 != sha(long) ||
					got.Content.T.Head != long[:audit.DefaultMaxValueBytes] {
					t.Fatalf("listed %.300s", listed)
				}
				if !strings.Contains(string(full), long) {
					t.Fatal("Get does not show the whole value")
				}
			}},
		{name: "row over the bound: one marker computed by Postgres", args: `{"path":"/w/huge","content":"` + huge + `"}`,
			check: func(t *testing.T, listed, full json.RawMessage) {
				var got marker
				if err := json.Unmarshal(listed, &got); err != nil || got.T == nil {
					t.Fatalf("listed %.300s: %v", listed, err)
				}
				if len(listed) > 2*audit.DefaultMaxValueBytes || got.T.Bytes != len(full) || got.T.SHA256 != sha(string(full)) ||
					got.T.Head != string(full[:audit.DefaultMaxValueBytes]) {
					t.Fatalf("listed %d bytes %.300s; want the length, hash and head of the %d shown", len(listed), listed, len(full))
				}
				if !strings.Contains(string(full), huge) {
					t.Fatal("Get does not show the whole arguments")
				}
			}},
		{name: "head of multibyte text ends on a character", args: `{"content":"` + wide + `"}`,
			check: func(t *testing.T, listed, full json.RawMessage) {
				var got marker
				if err := json.Unmarshal(listed, &got); err != nil || got.T == nil {
					t.Fatalf("listed %.300s: %v", listed, err)
				}
				h := got.T.Head
				if !utf8.ValidString(h) || len(h) > audit.DefaultMaxValueBytes || len(h) < audit.DefaultMaxValueBytes-1 || !strings.HasPrefix(string(full), h) {
					t.Fatalf("head is %d bytes, valid %v", len(h), utf8.ValidString(h))
				}
			}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := withArgs(req(fmt.Sprintf("form-%d", i)), tt.args)
			r.SessionID = fmt.Sprintf("form-%d", i)
			e := openRow(t, ctx, p, r)
			list, err := p.List(ctx, ListFilter{Session: r.SessionID})
			if err != nil || len(list) != 1 || list[0].ID != e.ID {
				t.Fatalf("List = %d rows, %v", len(list), err)
			}
			full, err := p.Get(ctx, e.ID)
			if err != nil {
				t.Fatal(err)
			}
			if string(full.Args) != string(audit.Redact(json.RawMessage(tt.args))) {
				t.Fatalf("Get args %.200s are not the canonical arguments", full.Args)
			}
			if !json.Valid(list[0].Args) {
				t.Fatalf("listed args not JSON: %.200s", list[0].Args)
			}
			tt.check(t, list[0].Args, full.Args)
		})
	}
}

// TestListPages: the cursor of the last row continues a listing in its
// own order (pending oldest first, otherwise newest first), without
// repeating or skipping rows that share a creation time.
func TestListPages(t *testing.T) {
	db := pgtest.New(t, pgtest.Migrated())
	ctx := testCtx(t)
	p := newTestPG(t, db, Config{})
	var ids []string
	for i := range 5 {
		ids = append(ids, openRow(t, ctx, p, withSession(req(fmt.Sprintf("page-%d", i)), "pages")).ID)
	}
	// Two rows with the same creation time: the id breaks the tie.
	if _, err := db.Pool.Exec(ctx, `UPDATE escalations SET created_at = (SELECT created_at FROM escalations WHERE id = $1) WHERE id = $2`, ids[1], ids[2]); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		status string
		oldest bool
	}{
		{name: "pending oldest first", status: StatusPending, oldest: true},
		{name: "all newest first", status: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			var prev *Escalation
			f := ListFilter{Status: tt.status, Session: "pages", Limit: 2}
			for pages := 0; pages < 10; pages++ {
				list, err := p.List(ctx, f)
				if err != nil {
					t.Fatal(err)
				}
				for i := range list {
					got = append(got, list[i].ID)
					if prev != nil {
						before := prev.CreatedAt.Before(list[i].CreatedAt) || (prev.CreatedAt.Equal(list[i].CreatedAt) && prev.ID < list[i].ID)
						if before != tt.oldest {
							t.Fatalf("rows out of order: %s then %s", prev.ID, list[i].ID)
						}
					}
					prev = &list[i]
				}
				if len(list) < 2 {
					break
				}
				f.Cursor = list[len(list)-1].Cursor()
				tok, err := audit.ParseCursor(f.Cursor.String())
				if err != nil || !tok.Time.Equal(f.Cursor.Time) || tok.CallID != f.Cursor.CallID {
					t.Fatalf("cursor round trip: %+v, %v", tok, err)
				}
			}
			if len(got) != len(ids) {
				t.Fatalf("pages gave %v, want each of %v once", got, ids)
			}
			seen := map[string]bool{}
			for _, id := range got {
				if seen[id] {
					t.Fatalf("row %s listed twice: %v", id, got)
				}
				seen[id] = true
			}
		})
	}
}

func TestListFilterValidate(t *testing.T) {
	tests := []struct {
		name    string
		f       ListFilter
		wantErr bool
	}{
		{name: "empty", f: ListFilter{}},
		{name: "pending of a session", f: ListFilter{Status: StatusPending, Session: "s1", Limit: 5}},
		{name: "unknown status", f: ListFilter{Status: "weird"}, wantErr: true},
		{name: "negative limit", f: ListFilter{Limit: -1}, wantErr: true},
		{name: "invalid UTF-8 session", f: ListFilter{Session: "s\xff"}, wantErr: true},
		{name: "NUL in session", f: ListFilter{Session: "s\x00"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.f.Validate()
			if (err != nil) != tt.wantErr || (err != nil && !errors.Is(err, ErrInvalidFilter)) {
				t.Fatalf("Validate = %v, want error %v (ErrInvalidFilter)", err, tt.wantErr)
			}
		})
	}
}

// TestListEachStops: fn's audit.ErrStop ends a listing without an error,
// any other error is returned.
func TestListEachStops(t *testing.T) {
	db := pgtest.New(t, pgtest.Migrated())
	ctx := testCtx(t)
	p := newTestPG(t, db, Config{})
	for i := range 3 {
		openRow(t, ctx, p, req(fmt.Sprintf("stop-%d", i)))
	}
	n := 0
	if err := p.ListEach(ctx, ListFilter{}, func(*Escalation) error { n++; return audit.ErrStop }); err != nil || n != 1 {
		t.Fatalf("ErrStop: %d rows, %v", n, err)
	}
	boom := errors.New("boom")
	if err := p.ListEach(ctx, ListFilter{}, func(*Escalation) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("fn error = %v", err)
	}
}
