package git

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"ironcurtain.dev/gateway/gitexec"
	"ironcurtain.dev/gateway/internal/gitscan"
	"ironcurtain.dev/gateway/internal/servers"
	"ironcurtain.dev/gateway/internal/servers/toolargs"
	"ironcurtain.dev/gateway/policy"
	"ironcurtain.dev/gateway/secretscan"
)

var _ policy.PushInspector = (*Server)(nil)

// InspectPush implements policy.PushInspector, before the push's decision:
// it resolves the objects the plan would push, stages them in the mirror
// (as the push itself will: fetched from the workspace by upload-pack, no
// workspace hook or config takes part) and scans what they add beyond what
// the gateway fetched from the push's upstreams (the mirror's fetch
// namespaces of plan.URLs): every commit and tag message, every blob, every
// new file name; and, whatever the upstream has, every destination ref name
// and the commit or tag each will point at (gitscan.NameHits, ScanTips). The objects it read are returned by destination; pushTool
// pushes exactly these or refuses.
func (s *Server) InspectPush(ctx context.Context, det *secretscan.Detector, repoDir string, in policy.PushInput, plan policy.PushPlan) (policy.PushInspection, error) {
	if c, ok, err := s.workspaceFor(repoDir); ok { // a session's repository (workspaces.go)
		if err != nil {
			return policy.PushInspection{}, err
		}
		return c.InspectPush(ctx, det, repoDir, in, plan)
	}
	r, err := s.openRepo(ctx, "path", repoDir)
	if err != nil {
		return policy.PushInspection{}, fmt.Errorf("opening the repository: %w", err)
	}
	specs, err := s.concreteRefspecs(ctx, r, in, plan)
	if err != nil {
		return policy.PushInspection{}, fmt.Errorf("expanding the refspecs: %w", err)
	}
	items, err := s.pushItems(ctx, r, specs)
	if err != nil {
		return policy.PushInspection{}, err
	}
	mirror := s.mirrors.For(r.repo.CommonDir)
	unlock := s.mirrors.Lock(mirror)
	defer unlock()
	if err := s.mirrors.Ensure(ctx, mirror); err != nil {
		return policy.PushInspection{}, err
	}
	if err := s.stageInMirror(ctx, r, mirror, items, plan.Tags); err != nil {
		return policy.PushInspection{}, err
	}
	objects, err := s.stagedObjects(ctx, mirror, items, plan.Tags)
	if err != nil {
		return policy.PushInspection{}, err
	}
	tips := make([]string, 0, len(objects))
	seen := map[string]bool{}
	for _, oid := range objects {
		if !seen[oid] {
			seen[oid] = true
			tips = append(tips, oid)
		}
	}
	var exclude []string
	for _, u := range plan.URLs {
		exclude = append(exclude, "--glob="+fetchNamespace(u.URL())+"/*")
	}
	o := s.mirrors.Options(mirror)
	o.Timeout = s.timeout
	lim := gitscan.Limits{MaxBytes: s.maxScan}
	rep, err := gitscan.Scan(ctx, o, det, tips, exclude, lim)
	if err != nil {
		return policy.PushInspection{}, err
	}
	// What leaves whatever the upstream has: the destination names and the
	// objects they will point at (commit and tag messages).
	tipRep, err := gitscan.ScanTips(ctx, o, det, tips, lim)
	if err != nil {
		return policy.PushInspection{}, err
	}
	rep.Merge(tipRep)
	names := make([]string, 0, len(objects))
	for dst := range objects {
		names = append(names, dst)
	}
	sort.Strings(names)
	hits := gitscan.NameHits(det, "ref name of update", names)
	s.log.Debug("git push: scanned for secrets", "objects", rep.Objects, "bytes", rep.Bytes, "names", len(names),
		"findings", len(rep.Findings)+len(hits), "incomplete", rep.Incomplete)
	return policy.PushInspection{Hits: append(hits, rep.Hits()...), Objects: objects}, nil
}

// pushItems resolves each refspec's source to the object it names.
func (s *Server) pushItems(ctx context.Context, r *repoHandle, specs []policy.PushRefspec) ([]pushItem, error) {
	items := make([]pushItem, 0, len(specs))
	for _, sp := range specs {
		if sp.Force || sp.Delete || sp.Wildcard || !strings.HasPrefix(sp.Dst, "refs/") {
			return nil, refuse("push refused: %s is not a plain update", toolargs.Clip(sp.Raw))
		}
		out, err := s.run(ctx, r, "rev-parse", "--verify", "--quiet", "--end-of-options", sp.Src)
		if err != nil {
			return nil, refuse("push refused: %s does not name an object in the repository", toolargs.Clip(sp.Src))
		}
		items = append(items, pushItem{src: sp.Src, oid: strings.TrimSpace(string(out.Stdout)), dst: sp.Dst})
	}
	return items, nil
}

// stagedObjects are the objects a push of items (and, with tags, the
// staged tags) sends, by destination ref.
func (s *Server) stagedObjects(ctx context.Context, mirror string, items []pushItem, tags bool) (map[string]string, error) {
	out := make(map[string]string, len(items))
	for _, it := range items {
		out[it.dst] = it.oid
	}
	if !tags {
		return out, nil
	}
	o := s.mirrors.Options(mirror)
	o.Timeout = s.timeout
	res, err := gitexec.Run(ctx, o, "for-each-ref", "--format=%(objectname) %(refname)", "--", pushTagNS)
	if err != nil {
		return nil, fmt.Errorf("listing the staged tags: %w", err)
	}
	for _, l := range strings.Split(strings.TrimSpace(string(res.Stdout)), "\n") {
		oid, ref, ok := strings.Cut(l, " ")
		if !ok {
			continue
		}
		out["refs/tags/"+strings.TrimPrefix(ref, pushTagNS)] = oid
	}
	return out, nil
}

// errPushMoved refuses a push whose objects differ from the ones the
// policy's secret scan read (the branch moved after the decision).
var errPushMoved = errors.New("push refused: the commits to push changed after they were scanned for secrets (and approved); push again")

// approvedPlan is the plan the policy judged (servers.CallInfo.Push or
// policy.WithPushPlan), nil when the call carries none.
func approvedPlan(ctx context.Context) *policy.PushPlan {
	info, _ := servers.CallInfoFrom(ctx)
	if info.Push != nil {
		return info.Push
	}
	p, _ := policy.PushPlanFromContext(ctx)
	return p
}

// bindInspected requires the objects about to be pushed to be the ones the
// decision's secret scan read (policy.PushPlan.Inspected), when it read any.
func bindInspected(approved *policy.PushPlan, staged map[string]string) error {
	if approved == nil || approved.Inspected == nil {
		return nil
	}
	if len(approved.Inspected) != len(staged) {
		return &toolError{msg: errPushMoved.Error()}
	}
	for dst, oid := range staged {
		if approved.Inspected[dst] != oid {
			return &toolError{msg: errPushMoved.Error()}
		}
	}
	return nil
}

// notePushed records in the mirror's fetch namespace of url that the
// upstream now has the pushed branches, so that the next push's secret scan
// does not read (and report) them again. A failure is logged only: the next
// scan then reads them again.
func (s *Server) notePushed(ctx context.Context, mirror, url string, items []pushItem) {
	ns := fetchNamespace(url)
	o := s.mirrors.Options(mirror)
	o.Timeout = s.timeout
	for _, it := range items {
		b, ok := strings.CutPrefix(it.dst, "refs/heads/")
		if !ok {
			continue
		}
		if _, err := gitexec.Run(ctx, o, "update-ref", "-m", "pushed", "--", ns+"/heads/"+b, it.oid); err != nil {
			s.log.Warn("git push: noting the pushed branch in the mirror failed", "ref", it.dst, "error", s.redact(err.Error()))
		}
	}
}
