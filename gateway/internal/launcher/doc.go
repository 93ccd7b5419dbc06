// Package launcher is the only holder of the Docker socket in an
// IronCurtain deployment. It runs third-party MCP servers ("image:" mode)
// in their own hardened containers on behalf of the gateway, which never
// sees the socket.
//
// The launcher reads its own configuration (server name → image, command,
// env, secret files, volumes, limits, network, egress proxy) and listens on
// a unix socket. A request is one line of strict JSON carrying an operation
// (start, stop or attach), a server name and the shared token; nothing
// else. The container spec is built in code from the launcher's
// configuration alone (spec.go): read-only root, every capability dropped,
// no-new-privileges, a non-root user, memory/pids/CPU limits, a tmpfs /tmp,
// no host mounts besides the configured named volumes and read-only secret
// files, the server's own internal network, and HTTPS_PROXY/HTTP_PROXY
// naming the gateway's egress proxy with the server's proxy identity as
// userinfo. A request that names an unknown server, or carries any other
// field (an image, a privileged flag, a mount, a capability), is refused
// and changes nothing.
//
// After a successful start or attach the connection carries the server's
// stdio: bytes from the gateway go to the container's stdin, its stdout
// comes back, its stderr goes to the launcher's log. Closing the connection
// closes the server's stdin; a started container is removed when its
// stream ends.
package launcher
