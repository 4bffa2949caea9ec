#!/usr/bin/env bash
# DeepSeek-V3.2 decode instance of a P/D deployment: NixlConnector receives KV
# from the prefill instance, HiSparseConnector keeps the full MLA KV in 128 GiB
# of pinned host RAM per DP replica. No --attention-config: hisparse_config is
# inferred from the connector. Same flags as `vllm serve`, plus the serving
# node's RAM (--host-memory-gib: an 8-GPU H200 server with 2 TiB), so the
# pinned pools are checked against it.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# hisparse-check from pip (or $HISPARSE_CHECK); else build and run it with cargo.
if [ -n "${HISPARSE_CHECK:-}" ]; then
  check=("$HISPARSE_CHECK")
elif command -v hisparse-check >/dev/null; then
  check=(hisparse-check)
else
  if [ ! -x "$here/target/release/hisparse-check" ]; then
    echo "building hisparse-check with cargo (first run only, about a minute on 2 cores)..." >&2
  fi
  check=(cargo run --quiet --release --manifest-path "$here/Cargo.toml" -p hisparse-check --)
fi
exec "${check[@]}" "$here/tests/data/models/deepseek-v3.2" \
  --tensor-parallel-size 8 \
  --kv-cache-dtype fp8_ds_mla \
  --host-memory-gib 2048 \
  --kv-transfer-config '{
    "kv_connector": "MultiConnector",
    "kv_role": "kv_consumer",
    "kv_connector_extra_config": {"connectors": [
      {"kv_connector": "NixlConnector", "kv_role": "kv_consumer"},
      {"kv_connector": "HiSparseConnector", "kv_role": "kv_both",
       "kv_connector_extra_config": {"host_pool_gib": 128}}
    ]}
  }' "$@"
