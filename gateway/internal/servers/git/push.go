package git

import (
	"context"
	"strconv"
	"strings"

	"ironcurtain.dev/gateway/gitexec"
	"ironcurtain.dev/gateway/internal/gitmirror"
	"ironcurtain.dev/gateway/internal/servers"
	"ironcurtain.dev/gateway/internal/servers/toolargs"
	"ironcurtain.dev/gateway/policy"
)

// Mirror ref namespaces of a push: the checked source objects and, with
// tags, the workspace's tags.
const (
	pushNS    = "refs/ironcurtain/push/"
	pushTagNS = "refs/ironcurtain/tags/"
)

// pushItem is one concrete update: the object to send and where it goes.
type pushItem struct {
	src string // source as planned (for reports and upstream)
	oid string
	dst string // refs/heads/... or refs/tags/...
}

// pushTool pushes exactly what the policy checked, from the mirror.
//
// The arguments are read by the policy package's own parser and the plan is
// computed by the policy's PushChecker (one parser, one answer): force,
// deletion, mirror and all-branches pushes and protected destinations are
// refused here too, whatever the hub decided. The plan must equal the one
// the policy judged (servers.CallInfo.Push). The source objects are then
// fetched from the workspace into the gateway's mirror and pushed from
// there to the plan's explicit URLs with explicit src:dst refspecs: no
// workspace config, hook or credential setting takes part.
func (s *Server) pushTool(ctx context.Context, c *toolargs.Args) (servers.Result, error) {
	r, err := s.openRepo(ctx, "path", c.Str("path"))
	if err != nil {
		return servers.Result{}, err
	}
	in, err := policy.ParsePushArgs(c.Raw())
	if err != nil {
		return servers.Result{}, &toolError{msg: "push refused: " + err.Error()}
	}
	plan, err := s.push.Check(ctx, r.dir, in)
	if err != nil {
		return servers.Result{}, err
	}
	if err := s.bindPush(ctx, plan); err != nil {
		return servers.Result{}, err
	}
	specs, err := s.concreteRefspecs(ctx, r, in, plan)
	if err != nil {
		return servers.Result{}, err
	}
	items, err := s.pushItems(ctx, r, specs)
	if err != nil {
		return servers.Result{}, err
	}
	if len(items) == 0 && !plan.Tags {
		return servers.Result{}, refuse("nothing to push")
	}

	mirror := s.mirrors.For(r.repo.CommonDir)
	unlock := s.mirrors.Lock(mirror)
	defer unlock()
	if err := s.mirrors.Ensure(ctx, mirror); err != nil {
		return servers.Result{}, err
	}
	if err := s.stageInMirror(ctx, r, mirror, items, plan.Tags); err != nil {
		return servers.Result{}, err
	}
	if !s.unsafeUnbound {
		// The objects must be the ones the decision's secret scan read.
		staged, err := s.stagedObjects(ctx, mirror, items, plan.Tags)
		if err != nil {
			return servers.Result{}, err
		}
		if err := bindInspected(approvedPlan(ctx), staged); err != nil {
			return servers.Result{}, err
		}
	}
	var reports []string
	for _, u := range plan.URLs {
		report, err := s.pushFromMirror(ctx, mirror, u.URL(), items, plan.Tags)
		reports = append(reports, report)
		if err != nil {
			return servers.Result{}, &toolError{msg: "git push failed", err: withReport(err, strings.Join(reports, "\n"))}
		}
		s.notePushed(ctx, mirror, u.URL(), items)
	}
	if plan.Remote != "" {
		s.recordPushed(ctx, r, plan, items)
	}
	return servers.Text(s.redact(strings.Join(reports, "\n"))), nil
}

// bindPush requires the plan computed now to be the plan the policy
// judged, carried in servers.CallInfo.Push or by policy.WithPushPlan.
func (s *Server) bindPush(ctx context.Context, plan policy.PushPlan) error {
	if s.unsafeUnbound {
		return nil
	}
	info, _ := servers.CallInfoFrom(ctx)
	approved := info.Push
	if approved == nil {
		approved, _ = policy.PushPlanFromContext(ctx)
	}
	if approved == nil {
		return refuse("push refused: the call carries no policy-checked push plan")
	}
	if !samePlan(*approved, plan) {
		return refuse("push refused: the repository changed since the policy checked the push (remote, URLs or refspecs differ)")
	}
	return nil
}

// samePlan is policy.PushPlan.Equal (same URLs, refspecs and tags) and,
// stricter, the same remote name, upstream setting and wildcards.
func samePlan(a, b policy.PushPlan) bool {
	if !a.Equal(b) || a.Remote != b.Remote || a.SetUpstream != b.SetUpstream {
		return false
	}
	for i := range a.Refspecs {
		if a.Refspecs[i].Wildcard != b.Refspecs[i].Wildcard {
			return false
		}
	}
	return true
}

// concreteRefspecs expands wildcard refspecs against the workspace's refs
// and has the policy's checker judge the concrete list again (protected
// branches are checked on real names).
func (s *Server) concreteRefspecs(ctx context.Context, r *repoHandle, in policy.PushInput, plan policy.PushPlan) ([]policy.PushRefspec, error) {
	wild := false
	for _, sp := range plan.Refspecs {
		wild = wild || sp.Wildcard
	}
	if !wild {
		return plan.Refspecs, nil
	}
	var concrete []string
	for _, sp := range plan.Refspecs {
		if !sp.Wildcard {
			concrete = append(concrete, sp.Src+":"+sp.Dst)
			continue
		}
		srcPre, srcSuf, _ := strings.Cut(sp.Src, "*")
		dstPre, dstSuf, _ := strings.Cut(sp.Dst, "*")
		dir := srcPre[:strings.LastIndexByte(srcPre, '/')+1]
		out, err := s.run(ctx, r, "for-each-ref", "--format=%(refname)", "--", dir)
		if err != nil {
			return nil, &toolError{msg: "listing refs failed", err: err}
		}
		for _, ref := range strings.Split(strings.TrimSpace(string(out.Stdout)), "\n") {
			if len(ref) < len(srcPre)+len(srcSuf) || !strings.HasPrefix(ref, srcPre) || !strings.HasSuffix(ref, srcSuf) {
				continue
			}
			star := ref[len(srcPre) : len(ref)-len(srcSuf)]
			concrete = append(concrete, ref+":"+dstPre+star+dstSuf)
		}
	}
	if len(concrete) == 0 {
		return nil, refuse("nothing to push: no ref matches the wildcard")
	}
	again := in
	again.Branch, again.RemoteBranch, again.Refspecs = "", "", concrete
	plan2, err := s.push.Check(ctx, r.dir, again)
	if err != nil {
		return nil, err
	}
	return plan2.Refspecs, nil
}

// stageInMirror fetches the source objects (and tags) from the workspace
// into the mirror under pushNS. The workspace is read by upload-pack with
// the hardened configuration; its hooks and programs never run.
func (s *Server) stageInMirror(ctx context.Context, r *repoHandle, mirror string, items []pushItem, tags bool) error {
	o := s.mirrors.Options(mirror)
	o.Timeout = s.timeout
	// Forget what earlier pushes staged.
	out, err := gitexec.Run(ctx, o, "for-each-ref", "--format=delete %(refname)", "--", pushNS, pushTagNS)
	if err != nil {
		return &toolError{msg: "preparing the mirror failed", err: err}
	}
	if len(out.Stdout) > 0 {
		del := o
		del.Stdin = strings.NewReader(string(out.Stdout))
		if _, err := gitexec.Run(ctx, del, "update-ref", "--stdin"); err != nil {
			return &toolError{msg: "preparing the mirror failed", err: err}
		}
	}
	args := []string{"fetch", "--no-tags", "--no-write-fetch-head", "--no-recurse-submodules", "--quiet", "--", r.repo.CommonDir}
	for i, it := range items {
		args = append(args, "+"+it.oid+":"+pushNS+strconv.Itoa(i))
	}
	if tags {
		args = append(args, "+refs/tags/*:"+pushTagNS+"*")
	}
	fo := gitmirror.LocalTransfer(o, r.repo.WorkTree, r.repo.GitDir, r.repo.CommonDir)
	fo.Config = append(fo.Config, "uploadpack.allowAnySHA1InWant=true")
	if _, err := gitexec.Run(ctx, fo, args...); err != nil {
		return &toolError{msg: "copying the commits to the gateway mirror failed", err: err}
	}
	return nil
}

// pushFromMirror pushes the staged objects to url and returns git's
// porcelain report with the staging refs replaced by the sources.
func (s *Server) pushFromMirror(ctx context.Context, mirror, url string, items []pushItem, tags bool) (string, error) {
	args := []string{"push", "--porcelain", "--no-verify", "--recurse-submodules=no", "--", url}
	for i, it := range items {
		args = append(args, pushNS+strconv.Itoa(i)+":"+it.dst)
	}
	if tags {
		args = append(args, pushTagNS+"*:refs/tags/*")
	}
	var res gitexec.Result
	err := s.networkOp(ctx, "push", remoteURL{url: url}, func() error {
		var err error
		res, err = gitexec.Run(ctx, s.mirrors.Options(mirror), args...)
		return err
	})
	report := gitexec.CleanText(string(res.Stdout))
	for i, it := range items {
		report = strings.ReplaceAll(report, pushNS+strconv.Itoa(i)+":", it.src+":")
	}
	report = strings.ReplaceAll(report, pushTagNS, "refs/tags/")
	return strings.TrimSpace(report), err
}

// withReport adds git's porcelain report to a failed push's message.
func withReport(err error, report string) error {
	if ge, ok := err.(*gitexec.Error); ok && report != "" {
		combined := *ge
		combined.Stderr = report + "\n" + ge.Stderr
		return &combined
	}
	return err
}

// recordPushed updates the workspace's remote-tracking refs (and the
// upstream with set_upstream) like git push does. Failures are logged only:
// the push itself succeeded.
func (s *Server) recordPushed(ctx context.Context, r *repoHandle, plan policy.PushPlan, items []pushItem) {
	for _, it := range items {
		b, ok := strings.CutPrefix(it.dst, "refs/heads/")
		if !ok {
			continue
		}
		tracking := "refs/remotes/" + plan.Remote + "/" + b
		if _, err := s.run(ctx, r, "update-ref", "-m", "push", "--", tracking, it.oid); err != nil {
			s.log.Warn("git push: updating the remote-tracking ref failed", "ref", tracking, "error", s.redact(err.Error()))
			continue
		}
		if local, ok := strings.CutPrefix(it.src, "refs/heads/"); ok && plan.SetUpstream {
			if _, err := s.run(ctx, r, "branch", "--set-upstream-to="+plan.Remote+"/"+b, "--end-of-options", local); err != nil {
				s.log.Warn("git push: setting the upstream failed", "branch", local, "error", s.redact(err.Error()))
			}
		}
	}
}
