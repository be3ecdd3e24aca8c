#!/usr/bin/env bash
# plan-pr.sh: what the GitHub Action (action.yml) runs. It plans, offline, the CRDs that a pull
# request changes: the files at BASE are the CRDs "as they are now" (--old-file), the files at
# HEAD the new release (-f), and the repository's sample objects (--objects) are evaluated under
# them. The plan's Markdown (-o markdown) becomes the pull request comment, and the exit status
# follows FAIL_ON. Nothing reaches a cluster.
#
# Environment (the action sets it from its inputs; a local run sets it by hand):
#   BASE           base revision (e.g. the pull request's base SHA)              required
#   HEAD           head revision                                                  default HEAD
#   CRDS           space-separated pathspecs where the CRDs live                  default .
#   OBJECTS        space-separated files or directories of sample objects, as
#                  they are at HEAD (optional)
#   FAIL_ON        breaking | stricter | never                                    default breaking
#   KUBE_VERSION   Kubernetes version to judge as (plan --kube-version; optional)
#   CRDVER         the kubectl-crdver binary                                      default kubectl-crdver
#   COMMENT_FILE   write the comment to this file instead of posting it
#   GITHUB_TOKEN, GITHUB_REPOSITORY, PR_NUMBER   to post the comment (gh api)
#
# Exit status: plan's (0 nothing to fail on; 1 the verdict FAIL_ON names; 2 bad input; 3 could
# not complete); FAIL_ON=never turns 1 into 0.
set -euo pipefail

: "${BASE:?BASE: the base revision to compare with}"
HEAD="${HEAD:-HEAD}"
CRDS="${CRDS:-.}"
FAIL_ON="${FAIL_ON:-breaking}"
CRDVER="${CRDVER:-kubectl-crdver}"
MARKER='<!-- kubectl-crdver plan -->'

case "$FAIL_ON" in
breaking | stricter | never) ;;
*)
	echo "error: FAIL_ON=$FAIL_ON: use breaking, stricter or never" >&2
	exit 2
	;;
esac

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/old" "$work/new"

# The CRD files the pull request adds, changes or renames (their content at HEAD names a
# CustomResourceDefinition).
read -r -a specs <<<"$CRDS"
changed=()
while IFS= read -r f; do
	case "$f" in
	*.yaml | *.yml | *.json) ;;
	*) continue ;;
	esac
	# grep reads the whole file (not -q): an early exit would fail git show with SIGPIPE.
	if git show "$HEAD:$f" 2>/dev/null | grep 'kind: *"\{0,1\}CustomResourceDefinition' >/dev/null; then
		changed+=("$f")
	fi
done < <(git diff --name-only --no-renames --diff-filter=AM "$BASE" "$HEAD" -- "${specs[@]}")

post() {
	local body="$1"
	if [ -n "${COMMENT_FILE:-}" ]; then
		cp "$body" "$COMMENT_FILE"
		return
	fi
	if [ -z "${GITHUB_TOKEN:-}" ] || [ -z "${PR_NUMBER:-}" ] || [ -z "${GITHUB_REPOSITORY:-}" ]; then
		echo "note: not a pull request (or no token): the comment is not posted" >&2
		cat "$body"
		return
	fi
	# One comment per pull request, updated on each push: the one carrying the marker.
	printf '%s\n' "$MARKER" >>"$body"
	local id
	id="$(GH_TOKEN="$GITHUB_TOKEN" gh api --paginate "repos/$GITHUB_REPOSITORY/issues/$PR_NUMBER/comments" \
		--jq ".[] | select(.body | contains(\"$MARKER\")) | .id" | tail -n 1)"
	if [ -n "$id" ]; then
		GH_TOKEN="$GITHUB_TOKEN" gh api -X PATCH "repos/$GITHUB_REPOSITORY/issues/comments/$id" -F "body=@$body" >/dev/null
	else
		GH_TOKEN="$GITHUB_TOKEN" gh api -X POST "repos/$GITHUB_REPOSITORY/issues/$PR_NUMBER/comments" -F "body=@$body" >/dev/null
	fi
}

if [ "${#changed[@]}" -eq 0 ]; then
	echo "no CustomResourceDefinition changed between $BASE and $HEAD under: $CRDS"
	exit 0
fi

# Each changed file at HEAD (-f) and, when it exists there, at BASE (--old-file); a CRD only
# at HEAD is a create. An empty --old-file says that none exists yet.
args=(plan -o markdown --fail-on "$([ "$FAIL_ON" = never ] && echo breaking || echo "$FAIL_ON")")
: >"$work/old/none.yaml"
args+=(--old-file "$work/old/none.yaml")
i=0
for f in "${changed[@]}"; do
	i=$((i + 1))
	name="$i-$(basename "$f")"
	git show "$HEAD:$f" >"$work/new/$name"
	args+=(-f "$work/new/$name")
	if git cat-file -e "$BASE:$f" 2>/dev/null; then
		git show "$BASE:$f" >"$work/old/$name"
		args+=(--old-file "$work/old/$name")
	fi
done
if [ -n "${OBJECTS:-}" ]; then
	read -r -a objects <<<"$OBJECTS"
	for o in "${objects[@]}"; do
		args+=(--objects "$o")
	done
fi
if [ -n "${KUBE_VERSION:-}" ]; then
	args+=(--kube-version "$KUBE_VERSION")
fi

echo "changed CRD files: ${changed[*]}" >&2
set +e
"$CRDVER" "${args[@]}" --quiet >"$work/comment.md" 2>"$work/stderr"
rc=$?
set -e
cat "$work/stderr" >&2
if [ "$rc" -ge 2 ]; then
	{
		echo "## kubectl crdver plan: **could not run** (exit $rc)"
		echo
		echo '```'
		grep '^error:' "$work/stderr" || tail -n 5 "$work/stderr"
		echo '```'
	} >"$work/comment.md"
fi
# The files are named in the comment by their repository path, not the temporary copies.
i=0
for f in "${changed[@]}"; do
	i=$((i + 1))
	name="$i-$(basename "$f")"
	sed -i.bak -e "s#$work/new/$name#$f#g" -e "s#$work/old/$name#$f@$BASE#g" "$work/comment.md"
done
rm -f "$work/comment.md.bak"
post "$work/comment.md"

if [ "$rc" -eq 1 ] && [ "$FAIL_ON" = never ]; then
	exit 0
fi
exit "$rc"
