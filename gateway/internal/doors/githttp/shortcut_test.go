package githttp

import (
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// The receive-pack advertisement reads the upstream's refs with one request
// (its own receive-pack listing) and refreshes the mirror only when it lacks
// their objects; the push is classified against the refs the client was
// shown. These tests attack that shortcut.

// advertise asks the door for the receive-pack advertisement, as git does
// before a push, and returns it.
func (e *env) advertise(t testing.TB) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, e.door.URL+"/git/github.com/acme/app.git/info/refs?service=git-receive-pack", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth("agent", agentToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || strings.Contains(string(b), "ERR ") {
		t.Fatalf("advertisement %d: %q", resp.StatusCode, b)
	}
	return string(b)
}

// count returns how many of reqs contain s.
func count(reqs []string, s string) int {
	n := 0
	for _, r := range reqs {
		if strings.Contains(r, s) {
			n++
		}
	}
	return n
}

// TestPushReadsTheUpstreamOnce: with a mirror that holds the upstream's
// tips, a push asks the upstream for its receive-pack refs at the
// advertisement and once more to push: no fetch.
func TestPushReadsTheUpstreamOnce(t *testing.T) {
	e := newEnv(t, envOptions{})
	work := e.clone(t)
	e.mustGit(t, work, "switch", "-q", "-c", "feature")
	e.commit(t, work, "f.txt", "one\n")
	e.mustGit(t, work, "push", "-q", "origin", "feature")
	for i := 0; i < 2; i++ {
		next := e.commit(t, work, fmt.Sprintf("g%d.txt", i), "two\n")
		n := len(e.up.requests())
		e.mustGit(t, work, "push", "-q", "origin", "feature")
		reqs := e.up.requests()[n:]
		t.Logf("push %d: upstream requests %q", i, reqs)
		if got := e.upstreamRef(t, "refs/heads/feature"); got != next {
			t.Fatalf("upstream feature %s, want %s", got, next)
		}
		if count(reqs, "git-upload-pack") != 0 || count(reqs, "info/refs?service=git-receive-pack") == 0 || count(reqs, "/git-receive-pack") != 1 {
			t.Fatalf("push %d asked the upstream for %q", i, reqs)
		}
	}
}

// TestStaleMirrorIsRefreshedAtTheAdvertisement: the upstream moved outside
// the door and the client builds on the new tip with a thin pack whose
// delta base only the new tip holds: the advertisement shows the new tip,
// the mirror lacks it and is refreshed, and the push lands.
func TestStaleMirrorIsRefreshedAtTheAdvertisement(t *testing.T) {
	e := newEnv(t, envOptions{})
	work := e.clone(t)
	e.mustGit(t, work, "switch", "-q", "-c", "feature")
	e.commit(t, work, "f.txt", "one\n")
	e.mustGit(t, work, "push", "-q", "origin", "feature")
	// Someone else adds a large file to feature, directly upstream.
	other := t.TempDir()
	run(t, "", "clone", "-q", "-b", "feature", e.bareD, other)
	big := randomText(64 << 10)
	writeFile(t, filepath.Join(other, "big.txt"), big)
	run(t, other, "add", "big.txt")
	run(t, other, "commit", "-q", "-m", "big")
	run(t, other, "push", "-q", "origin", "feature")
	moved := e.upstreamRef(t, "refs/heads/feature")
	// The client gets it from the upstream itself (not through the door,
	// which would refresh the mirror) and edits the file a little.
	e.mustGit(t, work, "pull", "-q", "--ff-only", e.bareD, "feature")
	next := e.commit(t, work, "big.txt", big+"one more line\n")
	n := len(e.up.requests())
	out := e.mustGit(t, work, "push", "origin", "feature")
	if got := e.upstreamRef(t, "refs/heads/feature"); got != next {
		t.Fatalf("upstream feature %s, want %s (moved: %s)\n%s", got, next, moved, out)
	}
	if count(e.up.requests()[n:], "git-upload-pack") == 0 {
		t.Fatalf("the stale mirror was not refreshed: %q", e.up.requests()[n:])
	}
}

// TestBranchDeletedUpstreamIsACreate: a branch deleted upstream (outside
// the door) that the mirror still has is pushed again from an unrelated
// history: it is classified against the upstream's refs, as a create, not
// against the mirror's stale ref.
func TestBranchDeletedUpstreamIsACreate(t *testing.T) {
	e := newEnv(t, envOptions{})
	work := e.clone(t)
	e.mustGit(t, work, "switch", "-q", "-c", "gone")
	e.commit(t, work, "f.txt", "one\n")
	e.mustGit(t, work, "push", "-q", "origin", "gone")
	run(t, "", "--git-dir", e.bareD, "update-ref", "-d", "refs/heads/gone")
	e.mustGit(t, work, "switch", "-q", "--orphan", "gone2")
	next := e.commit(t, work, "g.txt", "unrelated\n")
	e.mustGit(t, work, "push", "-q", "origin", "gone2:gone")
	if got := e.upstreamRef(t, "refs/heads/gone"); got != next {
		t.Fatalf("upstream gone %s, want %s", got, next)
	}
	if d := e.sink.last(t); d.Decision != "allow" || !strings.Contains(string(d.Args), `"create"`) || strings.Contains(string(d.Args), `"force"`) {
		t.Fatalf("record %+v %s", d, d.Args)
	}
}

// TestForceAgainstATipTheMirrorCannotFetch: the upstream advertises a
// branch for pushing whose tip it hides from fetches, so even a refresh
// leaves the mirror without it: an update of that branch cannot be shown
// to be a fast-forward and is classified as a force push, whatever the
// client claims; the never-forced upstream push leaves it alone.
func TestForceAgainstATipTheMirrorCannotFetch(t *testing.T) {
	e := newEnv(t, envOptions{})
	other := t.TempDir()
	run(t, "", "clone", "-q", e.bareD, other)
	run(t, other, "switch", "-q", "-c", "hidden")
	writeFile(t, filepath.Join(other, "h.txt"), "hidden\n")
	run(t, other, "add", "h.txt")
	run(t, other, "commit", "-q", "-m", "hidden")
	run(t, other, "push", "-q", "origin", "hidden")
	hidden := e.upstreamRef(t, "refs/heads/hidden")
	run(t, "", "--git-dir", e.bareD, "config", "uploadpack.hideRefs", "refs/heads/hidden")

	work := e.clone(t)
	base := strings.TrimSpace(e.mustGit(t, work, "rev-parse", "HEAD"))
	next := e.commit(t, work, "n.txt", "not a descendant of hidden\n")
	if adv := e.advertise(t); !strings.Contains(adv, hidden+" refs/heads/hidden") {
		t.Fatalf("advertisement %q lacks the hidden branch", adv)
	}
	body := commands("report-status side-band-64k", hidden+" "+next+" refs/heads/hidden")
	body = append(body, packOf(t, work, next, "^"+base)...)
	status, resp := e.rawPush(t, body)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, resp)
	}
	data, _, _ := decodeReport(t, resp)
	if !strings.Contains(data, "ng refs/heads/hidden") {
		t.Fatalf("report %q", data)
	}
	if d := e.sink.last(t); !strings.Contains(string(d.Args), `"force"`) || strings.Contains(string(d.Args), `"fast-forward"`) {
		t.Fatalf("record %+v %s", d, d.Args)
	}
	if got := e.upstreamRef(t, "refs/heads/hidden"); got != hidden {
		t.Fatalf("upstream hidden moved to %s", got)
	}
}

// TestRefTheAdvertisementHid: a branch the upstream hides from pushes is
// not shown; a push to it is judged as a create and refused by the
// upstream, which keeps its branch.
func TestRefTheAdvertisementHid(t *testing.T) {
	e := newEnv(t, envOptions{})
	work := e.clone(t)
	e.mustGit(t, work, "switch", "-q", "-c", "locked")
	e.commit(t, work, "f.txt", "one\n")
	e.mustGit(t, work, "push", "-q", "origin", "locked")
	locked := e.upstreamRef(t, "refs/heads/locked")
	run(t, "", "--git-dir", e.bareD, "config", "receive.hideRefs", "refs/heads/locked")
	if adv := e.advertise(t); strings.Contains(adv, "refs/heads/locked") {
		t.Fatalf("advertisement %q shows the hidden branch", adv)
	}
	next := e.commit(t, work, "g.txt", "two\n")
	body := commands("report-status side-band-64k", zero+" "+next+" refs/heads/locked")
	body = append(body, packOf(t, work, next, "^"+locked)...)
	status, resp := e.rawPush(t, body)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, resp)
	}
	data, _, _ := decodeReport(t, resp)
	if !strings.Contains(data, "ng refs/heads/locked") {
		t.Fatalf("report %q", data)
	}
	if d := e.sink.last(t); !strings.Contains(string(d.Args), `"create"`) {
		t.Fatalf("record %+v %s", d, d.Args)
	}
	if got := e.upstreamRef(t, "refs/heads/locked"); got != locked {
		t.Fatalf("upstream locked moved to %s", got)
	}
}

// TestPackLackingObjectsIsRefused: a pack that leaves out a commit neither
// the mirror nor the upstream has (its parent, never pushed) is refused,
// though its old tip is the upstream's: the upstream's tip bounds the
// connectivity checks only below what it reaches.
func TestPackLackingObjectsIsRefused(t *testing.T) {
	e := newEnv(t, envOptions{})
	work := e.clone(t)
	e.mustGit(t, work, "switch", "-q", "-c", "feature")
	e.commit(t, work, "f.txt", "one\n")
	e.mustGit(t, work, "push", "-q", "origin", "feature")
	base := e.upstreamRef(t, "refs/heads/feature")
	c1 := e.commit(t, work, "g.txt", "never pushed\n")
	c2 := e.commit(t, work, "h.txt", "on top\n")
	e.advertise(t)
	body := commands("report-status side-band-64k", base+" "+c2+" refs/heads/feature")
	body = append(body, packOf(t, work, c2, "^"+c1)...)
	status, resp := e.rawPush(t, body)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, resp)
	}
	data, _, _ := decodeReport(t, resp)
	if !strings.Contains(data, "ng refs/heads/feature") || !strings.Contains(data, "expected object") && !strings.Contains(data, "incomplete") {
		t.Fatalf("report %q", data)
	}
	if got := e.upstreamRef(t, "refs/heads/feature"); got != base {
		t.Fatalf("upstream feature moved to %s", got)
	}
}

// TestConcurrentPushesToOneRepository: two clients push on top of the same
// tip of one branch at once, each after its own advertisement: one lands,
// the other is rejected (by the door's classification or the upstream),
// and the branch is the winner's; pushes to different branches at once
// both land.
func TestConcurrentPushesToOneRepository(t *testing.T) {
	e := newEnv(t, envOptions{cfg: Config{Fresh: time.Hour}})
	first := e.clone(t)
	e.mustGit(t, first, "switch", "-q", "-c", "feature")
	e.commit(t, first, "f.txt", "one\n")
	e.mustGit(t, first, "push", "-q", "origin", "feature")
	works := []string{first, e.clone(t)}
	e.mustGit(t, works[1], "switch", "-q", "feature")
	for round, branches := range [][2]string{{"feature", "feature"}, {"left", "right"}} {
		var tips [2]string
		for i, w := range works {
			e.mustGit(t, w, "switch", "-q", "-C", branches[i], "origin/feature")
			tips[i] = e.commit(t, w, fmt.Sprintf("w%d-%d.txt", round, i), fmt.Sprintf("%d %d\n", round, i))
		}
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i, w := range works {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = e.git(w, "push", "-q", "origin", branches[i])
			}()
		}
		wg.Wait()
		if round == 0 {
			got := e.upstreamRef(t, "refs/heads/feature")
			won := -1
			for i := range tips {
				if got == tips[i] {
					won = i
				}
			}
			if won < 0 || errs[won] != nil || errs[1-won] == nil {
				t.Fatalf("upstream feature %s, tips %v, errors %v", got, tips, errs)
			}
			continue
		}
		for i := range works {
			if errs[i] != nil || e.upstreamRef(t, "refs/heads/"+branches[i]) != tips[i] {
				t.Fatalf("push of %s: %v; upstream %s, want %s", branches[i], errs[i], e.upstreamRef(t, "refs/heads/"+branches[i]), tips[i])
			}
		}
		e.mustGit(t, works[0], "fetch", "-q", "origin")
	}
}
