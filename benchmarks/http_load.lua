-- wrk script of benchmarks/http_load.py (workload (f)); not meant to be run by hand.
--
-- Arguments (after wrk's `--`): METHOD TOKEN BODY THREADS PATH [PATH ...]
--   BODY is the request body, or "-" for none (GET); THREADS is wrk's -t (init() runs
--   before every thread is set up, so it cannot count them itself).
--   The paths are split between wrk's threads (thread k takes paths k, k+n, k+2n, ...;
--   with one path every thread uses it) and each thread sends its paths in rotation.
--
-- Every response's status is counted (response()); done() prints one line
--   WRK_JSON {...}
-- with the totals, wrk's error counters and the latency percentiles in microseconds.

local threads = {}

function setup(thread)
   thread:set("thread_index", #threads)
   table.insert(threads, thread)
end

local requests_list = {}
local next_index = 1
statuses = {}

function init(args)
   local method, token, body = args[1], args[2], args[3]
   local thread_total = tonumber(args[4])
   if body == "-" then body = nil end
   local headers = {
      ["Authorization"] = "Bearer " .. token,
      ["Accept"] = "application/json",
   }
   if body ~= nil then headers["Content-Type"] = "application/json" end
   local paths = {}
   for i = 5, #args do table.insert(paths, args[i]) end
   local mine = {}
   if #paths == 1 then
      mine = paths
   else
      for i, p in ipairs(paths) do
         if (i - 1) % thread_total == thread_index then table.insert(mine, p) end
      end
      if #mine == 0 then mine = paths end
   end
   for _, p in ipairs(mine) do
      table.insert(requests_list, wrk.format(method, p, headers, body))
   end
end

function request()
   local r = requests_list[next_index]
   next_index = next_index % #requests_list + 1
   return r
end

function response(status, headers, body)
   statuses[status] = (statuses[status] or 0) + 1
end

function done(summary, latency, requests)
   local counts = {}
   for _, t in ipairs(threads) do
      local s = t:get("statuses")
      if s ~= nil then
         for code, n in pairs(s) do counts[code] = (counts[code] or 0) + n end
      end
   end
   local parts = {}
   for code, n in pairs(counts) do
      table.insert(parts, string.format('"%d": %d', code, n))
   end
   local e = summary.errors
   io.write(string.format(
      'WRK_JSON {"duration_us": %d, "requests": %d, "bytes": %d, ' ..
      '"errors": {"connect": %d, "read": %d, "write": %d, "status": %d, "timeout": %d}, ' ..
      '"statuses": {%s}, ' ..
      '"latency_us": {"min": %d, "mean": %.1f, "stdev": %.1f, "max": %d, ' ..
      '"p50": %d, "p90": %d, "p99": %d, "p999": %d}}\n',
      summary.duration, summary.requests, summary.bytes,
      e.connect, e.read, e.write, e.status, e.timeout,
      table.concat(parts, ", "),
      latency.min, latency.mean, latency.stdev, latency.max,
      latency:percentile(50), latency:percentile(90), latency:percentile(99),
      latency:percentile(99.9)))
end
