-- resp.lua - a minimal RESP client on ngx_lua cosockets (no Debian package
-- ships lua-resty-redis): GET over a keep-alive pool, for `rake bench:data`.
local _M = {}
local tcp, null, sub, tonumber = ngx.socket.tcp, ngx.null, string.sub, tonumber

local function read_reply(sock)
  local line, err = sock:receive("*l")         -- CR LF stripped
  if not line then return nil, err end
  local t, rest = sub(line, 1, 1), sub(line, 2)
  if t == "$" then
    local n = tonumber(rest)
    if n < 0 then return null end
    local data, e = sock:receive(n + 2)
    if not data then return nil, e end
    return sub(data, 1, n)
  elseif t == "+" then return rest
  elseif t == ":" then return tonumber(rest)
  elseif t == "-" then return nil, rest
  elseif t == "*" then
    local n, arr = tonumber(rest), {}
    if n < 0 then return null end
    for i = 1, n do
      local v, e = read_reply(sock)
      if v == nil then return nil, e end
      arr[i] = v
    end
    return arr
  end
  return nil, "protocol error"
end

function _M.get(host, port, key)
  local sock = tcp()
  sock:settimeouts(2000, 2000, 2000)
  local ok, err = sock:connect(host, port)      -- reuses a pooled connection
  if not ok then return nil, err end
  ok, err = sock:send({"*2\r\n$3\r\nGET\r\n$", #key, "\r\n", key, "\r\n"})
  if not ok then sock:close() return nil, err end
  local res, e = read_reply(sock)
  if res == nil then sock:close() return nil, e end
  sock:setkeepalive(10000, 100)
  return res
end

return _M
