-- wrk script for bench/run.sh: POSTs the AdmissionReview in $BODY to /mutate
-- and prints one machine-readable line when done.
local f = assert(io.open(assert(os.getenv("BODY"), "set BODY"), "rb"))
wrk.method = "POST"
wrk.path = "/mutate"
wrk.body = f:read("*a")
f:close()
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Host"] = "localhost"

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    "WRK requests=%d seconds=%.3f errors=%d connect=%d read=%d write=%d status=%d timeout=%d p50_us=%d p99_us=%d max_us=%d\n",
    summary.requests, summary.duration / 1e6,
    e.connect + e.read + e.write + e.status + e.timeout,
    e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(99), latency.max))
end
