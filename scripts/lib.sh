# Shared by the set-up scripts: installs the Debian packages of the commands that are missing.
# Usage: install_missing "command:package" ...
install_missing() {
  local need=() pair
  for pair in "$@"; do
    command -v "${pair%%:*}" >/dev/null || need+=("${pair#*:}")
  done
  [ ${#need[@]} -gt 0 ] || return 0
  install_debian "${need[@]}"
}

# Installs Debian packages (as root, else through sudo).
install_debian() {
  say "installing Debian packages: $*"
  local sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$@" >/dev/null
}

# Runs a step silently; shows its output only when it fails.
quiet() { local out; out=$("$@" 2>&1) || { printf '%s\n' "$out" >&2; return 1; }; }
