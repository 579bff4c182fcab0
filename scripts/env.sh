# Sourced by the other scripts: create (once) and activate the project's virtual environment.
# FEDFORGET_VENV overrides where it lives (default: .venv in the repository).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${FEDFORGET_VENV:-$repo/.venv}"
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
# shellcheck disable=SC1091
source "$venv/bin/activate"
stamp="$venv/.fedforget-installed"
if [ ! -f "$stamp" ] || [ "$repo/pyproject.toml" -nt "$stamp" ] || ! python -c "import pipeline, sys; sys.exit(not pipeline.__file__.startswith('$repo/'))" 2>/dev/null; then
    pip install --quiet --disable-pip-version-check -e "$repo[dev]"
    touch "$stamp"
fi
cd "$repo"
# Threads that have nothing to do sleep rather than spin (OpenMP's default spins): beside another busy
# process a spinning thread takes a core from it (docs/performance.md). pipeline/train.py sets it too.
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
