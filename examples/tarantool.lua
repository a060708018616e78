-- The Tarantool side of examples/tarantool.rb and of `rake bench:tarantool`:
-- one Tarantool serving process_request(req) two ways,
--
--   iproto   on IPROTO_PORT (default 3301): Async::Tarantool's call("process_request", [req])
--   HTTP/1.1 on HTTP_PORT   (default 8081): a small responder on Tarantool's own
--            `socket` module (one fiber per connection) that parses the request,
--            calls the same process_request and writes its {status, headers, body}
--
-- so a front (the gateway's proxy_pass, nginx's) and the gateway's iproto
-- client talk to the same function of the same Tarantool. Debian's Tarantool
-- 2.6 has no http.server rock, hence this responder.
--
-- Run:  tarantool examples/tarantool.lua [IPROTO_PORT [HTTP_PORT [WORK_DIR]]]
--       (WORK_DIR: default a fresh temporary directory; no WAL, nothing kept)
--
-- The responder: HTTP/1.0 and 1.1, keep-alive (1.1 unless "Connection:
-- close", 1.0 with "Connection: keep-alive"), a request body by
-- Content-Length (read and given to process_request as req.body), pipelined
-- requests answered in order. Bounded: a head over 8 KiB -> 431, more than 64
-- header lines -> 431, a body over 1 MiB -> 413, Transfer-Encoding -> 501, a
-- malformed request line or header -> 400; each of these answers and closes
-- the connection. A connection idle for 60 s (or a head or body not complete
-- within 60 s) is closed; at most 4096 connections at once (more are closed
-- at accept). An error in process_request, or a reply that is not
-- {status (100..999), headers, body} -> 500 (the connection is kept).
-- The globals http_accepted and http_served count connections and requests
-- (spec/tarantool_http_spec.rb reads them over iproto).
local socket = require('socket')
local fio = require('fio')
local log = require('log')

local iproto_port = tonumber(arg[1]) or 3301
local http_port = tonumber(arg[2]) or 8081
local work_dir = arg[3] or fio.tempdir()

box.cfg{listen = '127.0.0.1:' .. iproto_port, work_dir = work_dir, memtx_dir = work_dir, wal_mode = 'none'}
box.schema.user.grant('guest', 'execute', 'universe', nil, {if_not_exists = true})

-- The tarantool study's handler: req is {method =, path =, query =,
-- headers = {name = value}, body =} (over iproto: whatever the caller sends).
function process_request(req) -- luacheck: ignore (global: iproto calls it by name)
    return {200, {['x-a'] = '1'}, 'body'}
end

local MAX_HEAD = 8192
local MAX_HEADERS = 64
local MAX_BODY = 1024 * 1024
local TIMEOUT = 60
local MAX_CONNS = 4096

local REASON = {
    [200] = 'OK', [201] = 'Created', [204] = 'No Content', [301] = 'Moved Permanently', [302] = 'Found',
    [304] = 'Not Modified', [400] = 'Bad Request', [403] = 'Forbidden', [404] = 'Not Found',
    [413] = 'Content Too Large', [431] = 'Request Header Fields Too Large', [500] = 'Internal Server Error',
    [501] = 'Not Implemented', [502] = 'Bad Gateway', [503] = 'Service Unavailable',
}

-- A token (RFC 9110 tchar) then ':'; the value up to CRLF, blanks around it trimmed.
local HEADER = "^([%w!#$%%&'*+%-.^_`|~]+):[ \t]*([^\r\n]-)[ \t]*\r\n()"
-- Control characters other than HT, CR, LF (which the patterns place) are refused anywhere in the head.
local CONTROL = '[%z\1-\8\11\12\14-\31\127]'

-- keep: true, false, or 'announce' (an HTTP/1.0 client kept alive, which
-- must be told so).
local function response(status, headers, body, keep, head_only)
    local out = {'HTTP/1.1 ', tostring(status), ' ', REASON[status] or 'Status', '\r\n'}
    for name, value in pairs(headers) do
        name, value = tostring(name), tostring(value)
        -- process_request is trusted, but never let it split the response.
        if not (name:find('[\r\n:]') or value:find('[\r\n]')) then
            local l = name:lower()
            if l ~= 'content-length' and l ~= 'connection' and l ~= 'transfer-encoding' then
                out[#out + 1] = name .. ': ' .. value .. '\r\n'
            end
        end
    end
    out[#out + 1] = 'content-length: ' .. #body .. '\r\n'
    if not keep then
        out[#out + 1] = 'connection: close\r\n'
    elseif keep == 'announce' then
        out[#out + 1] = 'connection: keep-alive\r\n'
    end
    out[#out + 1] = '\r\n'
    if not head_only then out[#out + 1] = body end
    return table.concat(out)
end

local function refuse(s, status)
    s:write(response(status, {['content-type'] = 'text/plain'}, (REASON[status] or 'error') .. '\n', false), 5)
end

-- One request from s: the req table and whether to keep the connection
-- after it; nil when the connection is to be closed (EOF, timeout, or bad
-- input, which has been answered).
local function read_request(s)
    local head = s:read({delimiter = '\r\n\r\n', chunk = MAX_HEAD}, TIMEOUT)
    if head == nil or head == '' then return nil end -- error, timeout, or closed between requests
    if head:sub(-4) ~= '\r\n\r\n' then
        if #head >= MAX_HEAD then refuse(s, 431) end -- else: closed mid-head
        return nil
    end
    local method, target, minor, pos = head:match('^(%u+) (%S+) HTTP/1%.([01])\r\n()')
    if not method or head:find(CONTROL) then
        refuse(s, 400)
        return nil
    end
    local headers, n, stop = {}, 0, #head - 1
    while pos < stop do
        local name, value, nxt = head:match(HEADER, pos)
        n = n + 1
        if not name or n > MAX_HEADERS then
            refuse(s, name and 431 or 400)
            return nil
        end
        name = name:lower()
        local prev = headers[name]
        headers[name] = prev and (prev .. ', ' .. value) or value
        pos = nxt
    end
    if headers['transfer-encoding'] then
        refuse(s, 501)
        return nil
    end
    local body = ''
    local cl = headers['content-length']
    if cl then
        if not cl:match('^%d+$') or #cl > 9 then
            refuse(s, 400)
            return nil
        end
        local len = tonumber(cl)
        if len > MAX_BODY then
            refuse(s, 413)
            return nil
        end
        if len > 0 then
            body = s:read(len, TIMEOUT)
            if body == nil or #body < len then return nil end
        end
    end
    local conn = (headers['connection'] or ''):lower()
    local keep
    if minor == '1' then
        keep = not conn:find('close', 1, true)
    else
        keep = conn:find('keep-alive', 1, true) and 'announce' or false
    end
    local path, query = target:match('^([^?]*)%??(.*)$')
    return {method = method, path = path, query = query, headers = headers, body = body}, keep
end

local conns = 0
-- Totals for a look over iproto (`return http_accepted, http_served`).
http_accepted, http_served = 0, 0 -- luacheck: ignore (globals)

local function serve(s)
    while true do
        local req, keep = read_request(s)
        if not req then return end
        http_served = http_served + 1
        local ok, res = pcall(process_request, req)
        local status, headers, body
        local code = ok and type(res) == 'table' and tonumber(res[1])
        if code and code >= 100 and code <= 999 and code % 1 == 0 then
            status, headers, body = code, res[2], res[3]
            if type(headers) ~= 'table' then headers = {} end
            body = body == nil and '' or tostring(body)
        else
            log.error('process_request: %s', ok and 'did not return {status, headers, body}' or tostring(res))
            status, headers, body = 500, {['content-type'] = 'text/plain'}, 'Internal Server Error\n'
        end
        if not s:write(response(status, headers, body, keep, req.method == 'HEAD'), TIMEOUT) then return end
        if not keep then return end
    end
end

-- tcp_server runs the handler in a fiber of its own per connection and
-- closes the socket when it returns.
local server = socket.tcp_server('127.0.0.1', http_port, {
    name = 'http',
    handler = function(s)
        if conns >= MAX_CONNS then return end
        conns = conns + 1
        http_accepted = http_accepted + 1
        local ok, err = pcall(serve, s)
        conns = conns - 1
        if not ok then log.error('http: %s', tostring(err)) end
    end,
})
if not server then error(string.format('http: cannot listen on 127.0.0.1:%d', http_port)) end
log.info('HTTP on 127.0.0.1:%d, iproto on 127.0.0.1:%d', http_port, iproto_port)
