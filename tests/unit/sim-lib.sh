# SPDX-License-Identifier: MIT
# What the simulate-*.sh unit tests share, sourced after `set -euo pipefail`
# with sim_test set to the test's name: the PlanetLab day they replay (data),
# a work directory removed at exit (tmp), and fail(), which counts failures
# (failures) and names the test on a line that starts with its FAIL:.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
data=$here/../data/planetlab/20110303
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0

fail() {
    echo "$sim_test: FAIL: $*" >&2
    failures=$((failures + 1))
}
