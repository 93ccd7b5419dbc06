// Generated from the gateway's tools/list. Every function is synchronous:
// it returns the tool's result or throws an Error saying what was refused and why.

/** Tools of the JSON server. */
declare namespace JSON_ {
  /**
   * A server whose name shadows a global.
   *
   * MCP tool `JSON__parse`.
   */
  function parse(args?: unknown): string;
}

/** Tools of the filesystem server. */
declare namespace filesystem {
  /**
   * Make line-based edits to a text file. Returns a git-style diff.
   *
   * MCP tool `filesystem__edit_file`.
   */
  function edit_file(args: {
    /**
     * Preview changes using git-style diff format
     * @default false
     */
    dryRun?: boolean;
    edits: Array<{
      /** Text to replace with */
      newText: string;
      /** Text to search for - must match exactly */
      oldText: string;
    }>;
    path: string;
  }): string;
  /**
   * Returns the list of directories this server may access.
   *
   * MCP tool `filesystem__list_allowed_directories`.
   */
  function list_allowed_directories(args?: { [key: string]: unknown }): string;
  /**
   * List a directory with file sizes.
   *
   * MCP tool `filesystem__list_directory_with_sizes`.
   */
  function list_directory_with_sizes(args: {
    path: string;
    /**
     * Sort entries by name or size
     * @default "name"
     */
    sortBy?: "name" | "size";
  }): string;
  /**
   * Read the complete contents of a file as text.
   * Use head or tail to read only the first or last N lines.
   *
   * MCP tool `filesystem__read_text_file`.
   */
  function read_text_file(args: {
    /** Only the first N lines. */
    head?: number;
    /** Absolute path inside /workspace. */
    path: string;
    /** Only the last N lines. */
    tail?: number;
  }): string;
}

/** Tools of the git server. */
declare namespace git {
  /**
   * Show commit logs.
   *
   * MCP tool `git__log`.
   */
  function log(args: {
    max_count?: number;
    path: string;
  }): {
    commits: Array<{
      hash: string;
      parents?: unknown[];
      subject?: string;
    }>;
  };
  /**
   * Push a branch. Force pushes and pushes to protected branches are refused; other pushes may need human approval.
   *
   * MCP tool `git__push`.
   */
  function push(args: {
    branch?: string;
    force?: boolean;
    path: string;
    refspecs?: string[];
    /** Named remote or URL *\/ not a comment end */
    remote?: string;
    set_upstream?: boolean | null;
  }): string;
  /**
   * Show the working tree status.
   *
   * MCP tool `git__status`.
   */
  function status(args: {
    /** Repository directory. */
    path: string;
  }): string;
}

/** Tools of the weird-server.v2 server. */
declare namespace weird_server_v2 {
  /**
   * A tool whose names need sanitising.
   *
   * MCP tool `weird-server.v2__delete`.
   */
  function delete_(args?: {
    "content-type"?: string;
    mixed?: {
      a?: string;
    } & {
      b?: number;
    };
    mode?: "fast";
    options?: string | { [key: string]: number };
    pair?: [string, number, ...unknown[]];
  }): string;
}
