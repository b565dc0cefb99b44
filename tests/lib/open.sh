# SPDX-License-Identifier: MIT
# shellcheck shell=bash
#
# The common opening of a suite script (tests/SUITE/NAME.sh).  Its first
# lines, after the comment that says what it checks:
#   # shellcheck source-path=SCRIPTDIR source=../lib/open.sh
#   . "$(dirname "${BASH_SOURCE[0]}")/../lib/open.sh"
# Sets -euo pipefail and $here (the script's folder, absolute), and
# sources, from tests/lib/, targets.sh, report.sh, suite.sh and mount.sh
# (in that order).

set -euo pipefail

# shellcheck disable=SC2034 # for the script
here=$(cd "$(dirname "${BASH_SOURCE[1]}")" && pwd)
_open_lib=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=../lib/targets.sh
. "$_open_lib/targets.sh"
# shellcheck source-path=SCRIPTDIR source=../lib/report.sh
. "$_open_lib/report.sh"
# shellcheck source-path=SCRIPTDIR source=../lib/suite.sh
. "$_open_lib/suite.sh"
# shellcheck source-path=SCRIPTDIR source=../lib/mount.sh
. "$_open_lib/mount.sh"
