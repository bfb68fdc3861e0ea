"""The bus protocol (v7) as files: what a transport commits and how it is read. The layout of a transport and its
version check (with the template a new transport is scaffolded from), message files and their names, addresses and
the activation rule, the models registry (`data/crosstalk.yaml`) with its dotenv `env_file:`, and the reading of
files anyone who can push controls (safefs). No git, no processes, no machine-local state: it imports only
crosstalk.bus.errors below it."""
