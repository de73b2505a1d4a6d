#!/usr/bin/env bash
# A Debian sid chroot with CPython 3.14, for `make test-py VERSION=3.14`
# (Debian 12 packages no 3.14, and sid's python3.14 needs glibc >= 2.38).
#
#   tools/sid-chroot.sh setup DIR          # idempotent: debootstrap, CAs, python3.14
#   tools/sid-chroot.sh run DIR REPO CMD.. # CMD inside the chroot, REPO at /ringio
#
# `run` makes its mounts (/proc, /sys, /dev, the repository) in a private mount
# namespace (unshare): they vanish with the command, none is left on the host, and
# two runs at once do not see each other's. Needs root (debootstrap, chroot, mount).
set -euo pipefail

# dmsetup and gcc: the suite uses them on the host (device-mapper EIO tests, the C
# echo client), so the chroot has them too; wrk drives `bench http` there.
PACKAGES="python3.14 python3.14-venv python3.14-dev libpython3.14-testsuite ca-certificates \
dmsetup gcc libc6-dev wrk"

inside() { # DIR REPO CMD...: CMD in the chroot, with its mounts in a private namespace
	local dir=$1 repo=$2
	shift 2
	unshare --mount --propagation private -- /bin/sh -ec '
		dir=$1 repo=$2; shift 2
		mount -t proc proc "$dir/proc"
		mount --rbind /sys "$dir/sys"
		mount --rbind /dev "$dir/dev"
		if [ -n "$repo" ]; then
			mkdir -p "$dir/ringio" "$repo/bench/build" "$dir/var/tmp/ringio-bench-build"
			mount --bind "$repo" "$dir/ringio"
			# Binaries the suite compiles link sid'"'"'s glibc: kept apart from the
			# host'"'"'s (which could not run them).
			mount --bind "$dir/var/tmp/ringio-bench-build" "$dir/ringio/bench/build"
		fi
		exec chroot "$dir" /usr/bin/env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
			LANG=C.UTF-8 TERM=dumb CI="${CI:-}" /bin/sh -c "$*"
	' sh "$dir" "$repo" "$@"
}

setup() {
	local dir=$1
	# .ringio-ready holds the package list installed: a longer list installs again.
	if [ -x "$dir/usr/bin/python3.14" ] && [ "$(cat "$dir/.ringio-ready" 2>/dev/null)" = "$PACKAGES" ]; then
		return 0
	fi
	command -v debootstrap >/dev/null || {
		apt-get update -qq
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
	}
	if [ ! -e "$dir/.debootstrap-done" ]; then
		rm -rf "$dir"
		mkdir -p "$dir"
		echo "sid-chroot: debootstrap --variant=minbase sid $dir (about 70 s)"
		debootstrap --variant=minbase sid "$dir" >"$dir.debootstrap.log" 2>&1 || {
			tail -20 "$dir.debootstrap.log"
			exit 1
		}
		touch "$dir/.debootstrap-done"
	fi
	# The host's extra CA certificates (a proxy's), or pip fails with
	# CERTIFICATE_VERIFY_FAILED inside the chroot.
	mkdir -p "$dir/usr/local/share/ca-certificates"
	if compgen -G "/usr/local/share/ca-certificates/*" >/dev/null; then
		cp -a /usr/local/share/ca-certificates/. "$dir/usr/local/share/ca-certificates/"
	fi
	cp /etc/resolv.conf "$dir/etc/resolv.conf" 2>/dev/null || true
	# The mirror may serve a sid Release file past its Valid-Until date: accepted.
	inside "$dir" "" "apt-get -o Acquire::Check-Valid-Until=false update -qq && DEBIAN_FRONTEND=noninteractive \
		apt-get install -y -qq --no-install-recommends $PACKAGES >/dev/null \
		&& update-ca-certificates >/dev/null"
	echo "$PACKAGES" >"$dir/.ringio-ready"
}

cmd=${1:?usage: sid-chroot.sh setup DIR | run DIR REPO CMD...}
shift
case $cmd in
setup) setup "${1:?DIR}" ;;
run)
	dir=${1:?DIR} repo=${2:?REPO}
	shift 2
	inside "$dir" "$(cd "$repo" && pwd)" "$@"
	;;
*)
	echo "sid-chroot.sh: unknown command $cmd" >&2
	exit 2
	;;
esac
