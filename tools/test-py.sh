#!/usr/bin/env bash
# ringio's tests on one CPython version, from its built wheel (docs/versions.md).
#
#   tools/test-py.sh VERSION [pytest arguments...]     # VERSION: 3.11 ... 3.14
#   tools/test-py.sh VERSION --smoke     # the wheel alone in a fresh venv: a smoke run
#   tools/test-py.sh VERSION --bench [bench arguments...]  # `python -m ringio bench`
#
# Finds the interpreter (pyenv's $PYENV_ROOT/versions/VERSION.*, then pythonVERSION on
# PATH, then, for 3.13 and 3.14, a Debian sid chroot made by tools/sid-chroot.sh),
# makes the venv .venvs/VERSION, installs the newest dist/ringio-*-cpXY-cpXY-*.whl (with
# its `test` extra) when it changed, and runs pytest from the repository root, so
# that the installed wheel, not python/, is what the tests import. Without pytest
# arguments: the whole suite, CPython's own test_asyncio on ringio's loop included
# (tests/loop/test_cpython_asyncio.py). With --bench the venv gets the wheel's `bench`
# extra too (the peers that have wheels for that version) and runs the benchmarks.
set -euo pipefail
cd "$(dirname "$0")/.."

version=${1:?usage: tools/test-py.sh VERSION [pytest args...]}
shift
SID_CHROOT=${SID_CHROOT:-/var/tmp/ringio-sid}
venv=.venvs/$version

tag=cp${version/./}
wheel=$(ls -t dist/ringio-*-"$tag"-"$tag"-*x86_64*.whl 2>/dev/null | head -1 || true)
if [ -z "$wheel" ]; then
	echo "test-py: no $tag wheel in dist/: run 'make wheel' first" >&2
	exit 2
fi

find_python() {
	local root=${PYENV_ROOT:-$HOME/.pyenv} p
	for p in $(ls -d "$root"/versions/"$version".* 2>/dev/null | sort -V -r); do
		if [ -x "$p/bin/python$version" ]; then
			echo "$p/bin/python$version"
			return
		fi
	done
	command -v "python$version" 2>/dev/null || true
}

python=""
if [ -z "${RINGIO_IN_CHROOT:-}" ]; then
	python=$(find_python)
	if [ -z "$python" ]; then
		case $version in
		3.13 | 3.14)
			# Debian 12 packages neither; sid's need glibc >= 2.38: a chroot.
			tools/sid-chroot.sh setup "$SID_CHROOT"
			# The chroot has no git: the benchmarks' results name the commit thus.
			commit=$(git rev-parse --short=12 HEAD 2>/dev/null || true)
			if [ -n "$commit" ] && [ -n "$(git status --porcelain -uno 2>/dev/null)" ]; then
				commit+="+changes"
			fi
			args=""
			for a in "$@"; do args+=" $(printf '%q' "$a")"; done
			exec tools/sid-chroot.sh run "$SID_CHROOT" . \
				"cd /ringio && env RINGIO_IN_CHROOT=1 \
				RINGIO_CPYTHON_SUITE='${RINGIO_CPYTHON_SUITE:-}' \
				RINGIO_ENGINE='${RINGIO_ENGINE:-}' PYTEST_ADDOPTS='${PYTEST_ADDOPTS:-}' \
				RINGIO_BENCH_COMMIT='${RINGIO_BENCH_COMMIT:-$commit}' \
				bash tools/test-py.sh $version$args"
			;;
		*)
			echo "test-py: no CPython $version here. Install it with pyenv" \
				"('pyenv install $version'), or put python$version on PATH." >&2
			exit 2
			;;
		esac
	fi
else
	python=$(command -v "python$version")
fi

if [ "${1:-}" = "--smoke" ]; then
	# A fresh venv with nothing but the wheel (no dependency, no network), and
	# tools/wheel_smoke.py under -W error, from outside the repository.
	smoke=$(mktemp -d /tmp/ringio-smoke.XXXXXX)
	trap 'rm -rf "$smoke"' EXIT
	"$python" -m venv "$smoke/venv"
	"$smoke/venv/bin/python" -m pip install -q --no-index --no-deps "$wheel"
	cp tools/wheel_smoke.py "$smoke/"
	(cd "$smoke" && timeout 120 venv/bin/python -W error -X dev wheel_smoke.py)
	exit
fi

# A venv made by another interpreter (say the chroot's, at /usr/bin) is remade.
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "" 2>/dev/null \
	|| [ "$(readlink -f "$venv/bin/python")" != "$(readlink -f "$python")" ]; then
	rm -rf "$venv"
	"$python" -m venv "$venv"
	"$venv/bin/python" -m pip install -q --upgrade pip
fi
extra=test
if [ "${1:-}" = "--bench" ]; then
	extra=bench
	shift
fi
sum=$(sha256sum "$wheel" | cut -d' ' -f1)
if [ "$(cat "$venv/.wheel-$extra" 2>/dev/null)" != "$sum" ]; then
	"$venv/bin/python" -m pip install -q "$wheel[$extra]"
	"$venv/bin/python" -m pip install -q --force-reinstall --no-deps "$wheel"
	echo "$sum" >"$venv/.wheel-$extra"
fi
echo "test-py: $("$venv/bin/python" -VV | head -1), $(basename "$wheel")"
# The suite must import the wheel: python/ (the source tree) is not on sys.path.
"$venv/bin/python" - <<'EOF'
import ringio, sys
assert "site-packages" in ringio.__file__, f"ringio imported from {ringio.__file__}"
EOF
if [ "$extra" = bench ]; then
	exec "$venv/bin/python" -m ringio bench "$@"
fi
exec "$venv/bin/python" -m pytest -q -p no:cacheprovider "$@"
