#!/usr/bin/env bash
# Installs the peers the overhead bench measures beside cordon, when they are
# missing, and prints where they are: one `NAME VERSION PATH` line each.
#
#   codex   `codex sandbox` of OpenAI's codex CLI (the npm package ships the
#           native binary; the bench runs that, not the node shim)
#   srt     Anthropic's sandbox-runtime (a node program; on Linux it needs
#           ripgrep and socat, installed with apt-get when run as root)
#
# Usage: peers.sh DIR   (DIR holds the npm install; kept between runs)
set -euo pipefail

dir=${1:?usage: peers.sh DIR}
codex_version=0.171.0
srt_version=0.0.83

mkdir -p "$dir"
have() { [ -f "$dir/node_modules/$1/package.json" ] &&
	grep -q "\"version\": \"$2\"" "$dir/node_modules/$1/package.json"; }
if ! have @openai/codex "$codex_version" || ! have @anthropic-ai/sandbox-runtime "$srt_version"; then
	command -v npm >/dev/null || { echo "peers.sh: npm is not installed" >&2; exit 1; }
	npm install --silent --no-audit --no-fund --prefix "$dir" \
		"@openai/codex@$codex_version" "@anthropic-ai/sandbox-runtime@$srt_version" >&2
fi
if ! command -v rg >/dev/null || ! command -v socat >/dev/null; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
		apt-get install -y -qq ripgrep socat >/dev/null 2>&1 ||
			{ apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq ripgrep socat >/dev/null 2>&1; } ||
			echo "peers.sh: could not install ripgrep and socat (srt needs them)" >&2
	else
		echo "peers.sh: srt needs ripgrep and socat; install them" >&2
	fi
fi

codex=$(find "$dir/node_modules/@openai" -path '*/bin/codex' -type f -perm -u+x | head -n 1)
[ -n "$codex" ] && echo "codex $("$codex" --version | awk '{print $NF}') $codex"
srt="$dir/node_modules/.bin/srt"
[ -x "$srt" ] && command -v rg >/dev/null && command -v socat >/dev/null &&
	echo "srt $("$srt" --version) $srt"
exit 0
