#!/usr/bin/env bash
# kda agent launcher, shared by every scripts/launch_kernels/kNN_<task>.sh (generated; they exec this file with the
# task's folder and their own name).
#
#   launch.sh TASK_PATH LABEL [extra arguments for claude]
#
# Creates, from a committed base, a branch kda/<task>/<run-id>, a review-base branch kda-base/<task>/<run-id>
# pinned at the same commit, and a worktree ../<repo>-worktrees/<task>-<run-id>; inside it fetches the baseline
# (`kda vendor`), writes the agent brief .kda/BRIEF.md, the Stop hook in .claude/settings.json and the run
# manifest .kda/run.json (`kda launchers prepare`), then runs the agent there.
#
# Environment:
#   KDA_BASE_BRANCH      base ref (default: the current branch; HEAD when detached); must contain TASK_PATH
#   KDA_ALLOW_DIRTY=1    launch although the work tree has uncommitted changes (they are NOT in the worktree)
#   KDA_WORKTREE_ROOT    parent folder of worktrees (default: <repo>/../<repo-name>-worktrees)
#   KDA_RUN_ID           fixed run id YYYYmmddTHHMMSSZ-xxxx (default: UTC now + 4 random hex digits)
#   KDA_SKIP_VENDOR=1    do not run `kda vendor` in the worktree (tests, offline machines)
#   KDA_NO_CLAUDE=1      prepare everything, print the worktree, branches and agent command, and stop
#   KDA_AGENT_CMD        run this shell command instead of claude; it gets the brief path as $1 and in KDA_BRIEF.
#                        It runs under `kda launchers drive`: when it exits, the gate runs (as Claude Code's Stop
#                        hook would), and while the gate fails it starts again with the findings in KDA_FINDINGS
#   KDA_MODEL            claude --model (default opus)
#   KDA_EFFORT           claude --effort (default: not passed)
#   KDA_PERMISSION_MODE  claude --permission-mode (default bypassPermissions)
#   KDA_CLAUDE_BIN       the claude executable (default claude)
#   KDA_GPU              GPU index for CUDA_VISIBLE_DEVICES (default any: the brief tells the agent how to pick)
#   KDA_BIN              the kda executable (default: kda on PATH)
#   KDA_HOOK_TIMEOUT_S   Stop-hook timeout written into the settings (default 7200: a GPU gate is a full bench)

# Plain POSIX test syntax until the version is known: this must print its message even under bash 3.2.
if [ -z "${BASH_VERSINFO:-}" ] || [ "${BASH_VERSINFO[0]}" -lt 4 ]; then
  echo "kda launch: bash >= 4 is required, this is ${BASH_VERSION:-not bash}. On macOS: brew install bash, then" \
       "run the launcher with KDA_BASH=/opt/homebrew/bin/bash (or put that bash first on PATH)." >&2
  exit 1
fi
set -euo pipefail

die() { printf 'kda launch: %s\n' "$@" >&2; exit 1; }

[[ $# -ge 2 ]] || die "usage: launch.sh TASK_PATH LABEL [claude arguments]"
task_path="${1%/}"
label="$2"
shift 2
task="$(basename "$task_path")"

lib_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(git -C "$lib_dir" rev-parse --show-toplevel 2>/dev/null)" || die "$lib_dir is not inside a git repository"
g() { git -C "$repo" "$@"; }

kda_bin="${KDA_BIN:-$(command -v kda || true)}"
[[ -n $kda_bin ]] || die "the kda command is not on PATH: pip install -e '$repo' (or set KDA_BIN)"
# The hook command in .claude/settings.json must not depend on the agent's PATH: record an absolute path.
[[ $kda_bin == /* ]] || kda_bin="$(command -v "$kda_bin")" || die "KDA_BIN=$KDA_BIN is not executable"

# --- the base -----------------------------------------------------------------------------------------------
if [[ -n ${KDA_BASE_BRANCH:-} ]]; then
  base_ref="$KDA_BASE_BRANCH"
else
  base_ref="$(g symbolic-ref --short -q HEAD || echo HEAD)"
fi
base_commit="$(g rev-parse --verify -q "${base_ref}^{commit}")" || die "the base '$base_ref' does not name a commit (set KDA_BASE_BRANCH to a branch or commit)"
g cat-file -e "${base_commit}:${task_path}/config.toml" 2>/dev/null ||
  die "the base '$base_ref' (${base_commit:0:12}) has no task folder $task_path (no $task_path/config.toml in it)" \
      "pick a base that has the task with KDA_BASE_BRANCH=<branch>"

if [[ ${KDA_ALLOW_DIRTY:-0} != 1 ]]; then
  dirty="$(g status --porcelain)"
  if [[ -n $dirty ]]; then
    die "the work tree $repo has uncommitted changes; the agent starts from commit ${base_commit:0:12} without them:" \
        "$(head -n 8 <<<"$dirty")" "commit or stash them, or set KDA_ALLOW_DIRTY=1 to launch anyway"
  fi
fi

# --- names ----------------------------------------------------------------------------------------------------
if [[ -n ${KDA_RUN_ID:-} ]]; then
  run_id="$KDA_RUN_ID"
  [[ $run_id =~ ^[0-9]{8}T[0-9]{6}Z-[0-9a-f]{4}$ ]] || die "KDA_RUN_ID=$run_id is not YYYYmmddTHHMMSSZ-xxxx"
else
  run_id="$(date -u +%Y%m%dT%H%M%SZ)-$(od -An -N2 -tx1 /dev/urandom | tr -d ' \n')"
fi
branch="kda/$task/$run_id"
review_base="kda-base/$task/$run_id"
wt_root="${KDA_WORKTREE_ROOT:-$(dirname "$repo")/$(basename "$repo")-worktrees}"
worktree="$wt_root/$task-$run_id"
for b in "$branch" "$review_base"; do
  ! g show-ref --verify --quiet "refs/heads/$b" || die "the branch $b already exists; remove it or pick another KDA_RUN_ID"
done
[[ ! -e $worktree ]] || die "the worktree path $worktree already exists"
registered="$(g worktree list --porcelain)"  # no pipe into grep -q: with pipefail, git's SIGPIPE would count
! grep -qxF "worktree $worktree" <<<"$registered" ||
  die "git already has a worktree registered at $worktree (run: git worktree prune)"

# --- the agent command ----------------------------------------------------------------------------------------
model="${KDA_MODEL:-opus}"
effort="${KDA_EFFORT:-}"
perm="${KDA_PERMISSION_MODE:-bypassPermissions}"
prompt="Read .kda/BRIEF.md in this folder and carry out the task it describes, under its rules and gates."
if [[ -n ${KDA_AGENT_CMD:-} ]]; then
  agent_kind=custom
  # no Stop hook of its own (codex exec, any command): the driver runs the gate when it exits (kda/loop/drive.py)
  agent=("$kda_bin" launchers drive --worktree "$worktree" -- bash -c "$KDA_AGENT_CMD" kda-agent
         "$worktree/.kda/BRIEF.md" "$@")
else
  agent_kind=claude
  agent=("${KDA_CLAUDE_BIN:-claude}" --model "$model" --permission-mode "$perm")
  [[ -z $effort ]] || agent+=(--effort "$effort")
  agent+=("$@" "$prompt")
fi
agent_line="$(printf '%q ' "${agent[@]}")"
agent_line="${agent_line% }"

# Claude Code refuses bypassPermissions as root unless IS_SANDBOX=1 declares a disposable sandbox. Setting it is a
# claim about this machine, so the launcher never sets it for you: it stops and says what to do.
root_note=""
if [[ $agent_kind == claude && $perm == bypassPermissions && $(id -u) == 0 && ${IS_SANDBOX:-} != 1 ]]; then
  root_note="running as root: Claude Code refuses --permission-mode bypassPermissions for root unless IS_SANDBOX=1. If this machine is a disposable sandbox, export IS_SANDBOX=1; otherwise run as a normal user or set KDA_PERMISSION_MODE=acceptEdits."
  [[ ${KDA_NO_CLAUDE:-0} == 1 ]] || die "$root_note"
fi
if [[ $agent_kind == claude && ${KDA_NO_CLAUDE:-0} != 1 ]]; then
  command -v "${agent[0]}" >/dev/null || die "${agent[0]} is not on PATH (install Claude Code, or set KDA_CLAUDE_BIN or KDA_AGENT_CMD)"
fi

# --- create ---------------------------------------------------------------------------------------------------
mkdir -p "$wt_root"
g branch "$review_base" "$base_commit"
trap 'echo "kda launch: failed after creating $review_base; clean up with: git -C \"$repo\" worktree remove --force \"$worktree\"; git -C \"$repo\" branch -D \"$branch\" \"$review_base\"" >&2' ERR
g worktree add -q -b "$branch" "$worktree" "$base_commit"

export KDA_ROOT="$worktree"
export KDA_CACHE="${KDA_CACHE:-$repo/.kda-cache}"  # one download of each pinned wheel for all worktrees
cd "$worktree"
if [[ ${KDA_SKIP_VENDOR:-0} != 1 ]]; then
  "$kda_bin" vendor "$task_path"
fi
"$kda_bin" launchers prepare --worktree "$worktree" --repo "$repo" --task-path "$task_path" --label "$label" \
  --run-id "$run_id" --base-ref "$base_ref" --base-commit "$base_commit" --branch "$branch" \
  --review-base "$review_base" --agent-kind "$agent_kind" --agent-command "$agent_line" --model "$model" \
  --effort "$effort" --permission-mode "$perm" --gpu "${KDA_GPU:-any}" \
  --hook-command "$(printf '%q' "$kda_bin") hook stop" --hook-timeout "${KDA_HOOK_TIMEOUT_S:-7200}"
trap - ERR

cat <<EOF
kda launch: $label, run $run_id
  worktree     $worktree
  branch       $branch
  review base  $review_base (${base_commit:0:12}, from $base_ref)
  brief        $worktree/.kda/BRIEF.md
  manifest     $worktree/.kda/run.json
  agent        (cd $(printf '%q' "$worktree") && $agent_line)
EOF
[[ -z $root_note ]] || echo "kda launch: note: $root_note" >&2

if [[ ${KDA_NO_CLAUDE:-0} == 1 ]]; then
  echo "KDA_NO_CLAUDE=1: not starting the agent."
  exit 0
fi
if [[ -n ${KDA_GPU:-} && ${KDA_GPU} != any ]]; then
  export CUDA_VISIBLE_DEVICES="$KDA_GPU"
fi
export KDA_RUN="$run_id" KDA_TASK="$task_path" KDA_BRIEF="$worktree/.kda/BRIEF.md"
exec "${agent[@]}"
