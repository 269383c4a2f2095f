-- wrk script for scripts/bench/api_overhead.py: each request carries the next key of this wrk thread's
-- own share of the keys in a file (one per line), so every connection's reads stay within its pace.
-- Usage: wrk ... -s keys.lua URL -- KEYS_FILE THREADS   (the bare route gets the same headers)
local threads = 0

function setup(thread)
   thread:set("id", threads)
   threads = threads + 1
end

function init(args)
   keys = {}
   local n = 0
   for line in io.lines(args[1]) do
      if n % tonumber(args[2]) == id then
         table.insert(keys, "Bearer " .. line)
      end
      n = n + 1
   end
   i = 0
end

function request()
   i = i % #keys + 1
   return wrk.format("GET", nil, {["Authorization"] = keys[i]})
end
