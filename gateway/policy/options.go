package policy

// An Option supplies something the engine reads from outside itself: the
// git remote resolver (WithRemoteResolver), the file system
// (WithFileSystem). Options are given to LoadDir, LoadDirRecorded and New;
// session views and the shadow policy inherit them.
type Option func(*env)

// env is what the options supply.
type env struct {
	fs      FileSystem
	remotes RemoteResolver
}

// WithRemoteResolver gives the engine the resolver of named and default git
// remotes (gateway/gitremote in the gateway and the compiler). Without one,
// every call that depends on a repository's remotes (a git push, a fetch or
// pull naming a remote or none) is denied.
func WithRemoteResolver(r RemoteResolver) Option {
	return func(e *env) { e.remotes = r }
}

// WithFileSystem replaces the operating system's file system (LoadDir,
// New; LoadDirRecorded keeps its empty one).
func WithFileSystem(fsys FileSystem) Option {
	return func(e *env) {
		if fsys != nil {
			e.fs = fsys
		}
	}
}

// newEnv applies opts over the defaults: fsys, and no resolver.
func newEnv(fsys FileSystem, opts []Option) env {
	e := env{fs: fsys}
	for _, o := range opts {
		if o != nil {
			o(&e)
		}
	}
	if e.remotes == nil {
		e.remotes = noResolver{}
	}
	return e
}
