package migrations

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
)

//go:embed sql/*.sql
var files embed.FS

// Migration is one numbered schema change with its inverse.
type Migration struct {
	Version int    // 1, 2, 3, ... without gaps
	Name    string // the part after NNNN_, e.g. "audit"
	Up      string // SQL applied by `migrate up`
	Down    string // SQL that undoes Up
}

// FS returns the embedded NNNN_name.up.sql / .down.sql files at its root,
// in the layout golang-migrate's iofs source reads. Callers should check
// All first: it refuses gaps and half pairs, which the runner would not.
func FS() fs.FS {
	sub, err := fs.Sub(files, "sql")
	if err != nil {
		panic(err) // "sql" is a valid path, fs.Sub cannot fail on it
	}
	return sub
}

// All returns the embedded migrations in version order.
func All() ([]Migration, error) {
	return parse(files, "sql")
}

// Latest returns the highest embedded version (0 when there is none).
func Latest() (int, error) {
	ms, err := All()
	if err != nil {
		return 0, err
	}
	if len(ms) == 0 {
		return 0, nil
	}
	return ms[len(ms)-1].Version, nil
}

// parse reads NNNN_name.up.sql / NNNN_name.down.sql pairs from dir in fsys.
// Every version must have both files, one name, and versions must run
// 1..N without gaps.
func parse(fsys fs.FS, dir string) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("reading migrations: %w", err)
	}
	byVersion := map[int]*Migration{}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		fileName := e.Name()
		version, name, direction, err := parseName(fileName)
		if err != nil {
			return nil, err
		}
		body, err := fs.ReadFile(fsys, path.Join(dir, fileName))
		if err != nil {
			return nil, fmt.Errorf("reading migration %s: %w", fileName, err)
		}
		if strings.TrimSpace(string(body)) == "" {
			return nil, fmt.Errorf("migration %s: empty file", fileName)
		}
		m := byVersion[version]
		if m == nil {
			m = &Migration{Version: version, Name: name}
			byVersion[version] = m
		}
		if m.Name != name {
			return nil, fmt.Errorf("migration %s: version %04d is also named %q", fileName, version, m.Name)
		}
		switch direction {
		case "up":
			m.Up = string(body)
		case "down":
			m.Down = string(body)
		}
	}
	out := make([]Migration, 0, len(byVersion))
	for _, m := range byVersion {
		out = append(out, *m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	for i, m := range out {
		if m.Version != i+1 {
			return nil, fmt.Errorf("migration %04d_%s: expected version %04d (versions start at 1 without gaps)", m.Version, m.Name, i+1)
		}
		if m.Up == "" || m.Down == "" {
			return nil, fmt.Errorf("migration %04d_%s: needs both .up.sql and .down.sql", m.Version, m.Name)
		}
	}
	return out, nil
}

// parseName splits "0001_audit.up.sql" into 1, "audit", "up".
func parseName(fileName string) (version int, name, direction string, err error) {
	base, ok := strings.CutSuffix(fileName, ".sql")
	if !ok {
		return 0, "", "", fmt.Errorf("migration %s: file name must end in .up.sql or .down.sql", fileName)
	}
	switch {
	case strings.HasSuffix(base, ".up"):
		direction, base = "up", strings.TrimSuffix(base, ".up")
	case strings.HasSuffix(base, ".down"):
		direction, base = "down", strings.TrimSuffix(base, ".down")
	default:
		return 0, "", "", fmt.Errorf("migration %s: file name must end in .up.sql or .down.sql", fileName)
	}
	num, name, ok := strings.Cut(base, "_")
	if !ok || len(num) != 4 || name == "" {
		return 0, "", "", fmt.Errorf("migration %s: file name must look like NNNN_name.up.sql", fileName)
	}
	version, err = strconv.Atoi(num)
	if err != nil || version < 1 {
		return 0, "", "", fmt.Errorf("migration %s: %q is not a positive four-digit version", fileName, num)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_') {
			return 0, "", "", fmt.Errorf("migration %s: name %q may only hold a-z, 0-9 and _", fileName, name)
		}
	}
	return version, name, direction, nil
}
