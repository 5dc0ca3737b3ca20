#!/bin/sh
# gitmail-reservation-guard
#
# Installed by `gitmail guard install PROJECT REPO`; removed by `gitmail guard uninstall REPO`.
# Refuses a commit (pre-commit) or a push (pre-push) that touches files another
# agent holds under an active exclusive gitmail reservation.
#
#   AGENT_NAME=<name>       the agent committing (its own reservations never block it)
#   GITMAIL_GUARD_MODE=warn report conflicts but let the commit or push through
#   GITMAIL_GUARD_BYPASS=1  skip the check once
#   GITMAIL_HOME            where the store lives (default ~/.gitmail)
#
# The project is read from `git config gitmail.project`, so nothing here names
# a store path: moving the store only needs GITMAIL_HOME to follow it. A hook
# that was here before the guard was kept as <hook>.gitmail-chained and runs first.

hook=$(basename "$0")
dir=$(dirname "$0")
chained="$dir/$hook.gitmail-chained"

guard() {
    if command -v gitmail >/dev/null 2>&1; then
        gitmail guard check --hook "$hook"
    else
        "${GITMAIL_PYTHON:-python3}" -m gitmail guard check --hook "$hook"
    fi
}

if [ "$hook" = "pre-push" ]; then
    # git hands the refs being pushed on standard input; both hooks need them.
    input=$(cat)
    if [ -x "$chained" ]; then
        printf '%s\n' "$input" | "$chained" "$@" || exit $?
    fi
    printf '%s\n' "$input" | guard
else
    if [ -x "$chained" ]; then
        "$chained" "$@" || exit $?
    fi
    guard
fi
