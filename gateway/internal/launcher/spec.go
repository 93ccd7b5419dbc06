package launcher

import (
	"sort"
	"strconv"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"
)

// Container labels set on every container the launcher creates.
const (
	LabelManaged = "dev.ironcurtain.launcher"
	LabelServer  = "dev.ironcurtain.server"
)

// ContainerName is the name of server name's container.
func ContainerName(name string) string { return "ironcurtain-srv-" + name }

// BuildSpec is the container of server name: everything comes from s (the
// launcher's configuration, validated) and the proxy identity; nothing from
// a request. proxy is host:port of the egress proxy ("" for none).
func BuildSpec(name string, s ServerConfig, proxy, identity string) client.ContainerCreateOptions {
	env := make([]string, 0, len(s.Env)+4)
	for _, k := range sortedKeys(s.Env) {
		env = append(env, k+"="+s.Env[k])
	}
	if proxy != "" && s.Network != "none" {
		u := "http://" + name + ":" + identity + "@" + proxy
		env = append(env, "HTTPS_PROXY="+u, "HTTP_PROXY="+u, "https_proxy="+u, "http_proxy="+u)
	}
	sort.Strings(env)
	mounts := make([]mount.Mount, 0, len(s.Volumes)+len(s.SecretFiles))
	for _, v := range s.Volumes {
		mounts = append(mounts, mount.Mount{Type: mount.TypeVolume, Source: v.Name, Target: v.Target, ReadOnly: !v.Writable,
			VolumeOptions: &mount.VolumeOptions{NoCopy: true}})
	}
	for _, f := range s.SecretFiles {
		mounts = append(mounts, mount.Mount{Type: mount.TypeBind, Source: f.Source, Target: f.Target, ReadOnly: true,
			BindOptions: &mount.BindOptions{Propagation: mount.PropagationRPrivate}})
	}
	mem := s.MemoryMB << 20
	pids := s.Pids
	cfg := &container.Config{
		Image:        s.Image,
		Cmd:          append([]string(nil), s.Args...),
		Env:          env,
		User:         s.User,
		AttachStdin:  true,
		AttachStdout: true,
		AttachStderr: true,
		OpenStdin:    true,
		StdinOnce:    true,
		Tty:          false,
		Labels:       map[string]string{LabelManaged: "1", LabelServer: name},
	}
	hc := &container.HostConfig{
		NetworkMode:    container.NetworkMode(s.Network),
		Privileged:     false,
		ReadonlyRootfs: true,
		CapDrop:        []string{"ALL"},
		SecurityOpt:    []string{"no-new-privileges:true"},
		IpcMode:        container.IPCModePrivate,
		Tmpfs:          map[string]string{"/tmp": "rw,noexec,nosuid,nodev,size=" + strconv.FormatInt(s.TmpfsMB, 10) + "m"},
		Mounts:         mounts,
		AutoRemove:     true,
		// Output reaches the gateway through the attach stream only: no
		// log file on the host for a flood to fill.
		LogConfig: container.LogConfig{Type: "none"},
		Resources: container.Resources{
			Memory:     mem,
			MemorySwap: mem, // no swap
			PidsLimit:  &pids,
			NanoCPUs:   int64(s.CPUs * 1e9),
			Ulimits:    []*container.Ulimit{{Name: "nofile", Soft: 1024, Hard: 1024}, {Name: "core", Soft: 0, Hard: 0}},
		},
	}
	return client.ContainerCreateOptions{Name: ContainerName(name), Config: cfg, HostConfig: hc}
}
