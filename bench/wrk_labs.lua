-- wrk script for the status benchmark: GET /spawner/v1/labs/<user> with a bearer token,
-- cycling over BENCH_USERS users named by BENCH_USER_FORMAT (e.g. "status-%04d").
local token = os.getenv("BENCH_TOKEN") or ""
local users = tonumber(os.getenv("BENCH_USERS") or "1")
local name_format = os.getenv("BENCH_USER_FORMAT") or "status-%04d"
local path_prefix = os.getenv("BENCH_PATH_PREFIX") or "/spawner/v1/labs/"
local headers = { ["Authorization"] = "Bearer " .. token }
local counter = 0

request = function()
  local path = path_prefix .. string.format(name_format, counter % users)
  counter = counter + 1
  return wrk.format("GET", path, headers)
end
