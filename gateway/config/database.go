package config

// DefaultDatabaseURLEnv names the variable holding the Postgres DSN.
const DefaultDatabaseURLEnv = "IRONCURTAIN_DATABASE_URL"

// DatabaseConfig is the database section of gateway.yaml. The DSN carries a
// password, so it comes from the environment (URLEnv) or a file (URLFile).
//
//	database:
//	  url_file: /run/secrets/database-url
type DatabaseConfig struct {
	URLEnv  string `yaml:"url_env"`
	URLFile string `yaml:"url_file"`
	// UnsafeNoDatabase runs without Postgres: audit goes to audit.jsonl_file
	// only and every escalation is denied. For local experiments, never for
	// a deployment (no durable approvals, no hash chain).
	UnsafeNoDatabase bool `yaml:"unsafe_no_database"`
}

// URLVariable returns the environment variable the DSN is read from.
func (d *DatabaseConfig) URLVariable() string {
	if d.URLEnv == "" {
		return DefaultDatabaseURLEnv
	}
	return d.URLEnv
}

// Validate implements Validator.
func (d *DatabaseConfig) Validate() error {
	if d.URLEnv != "" && !validEnvName(d.URLEnv) {
		return Errorf("url_env", "%q is not an environment variable name", d.URLEnv)
	}
	return nil
}
