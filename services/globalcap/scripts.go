package globalcap

import "github.com/redis/go-redis/v9"

// The slots of a connection live in two sorted sets in Redis: its leases and its waiters, each
// member scored with the time (Unix ms) at which it runs out unless renewed. Every step is a
// Lua script, for two reasons. Taking a slot is "drop what ran out, count, add if there is
// room": as separate commands two replicas could both count 1 of 2 and both add (MULTI/WATCH
// would retry under exactly the contention this exists for), while a script runs atomically in
// one round trip. And each script reads the time from Redis (TIME), so the leases of all
// replicas run out on one clock: a replica whose clock drifts neither shortens nor stretches
// the others' leases.
//
// Keys carry the connection id in braces ({42}) so that a connection's two sets hash to one
// Redis Cluster slot, as a script touching both requires.

// acquireScript takes a lease when the connection has room, or keeps the caller in line.
// Waiters come first: one already in line may take any free slot, a newcomer only a slot that
// no waiter is counted for, so a steady stream of newcomers cannot starve the line (order
// within the line is not kept).
//
// KEYS: leases, waiters. ARGV: member, cap, lease ms, "queue" (join the line when no slot is
// free) or "try" (give up), most waiters (0 = unbounded).
// Returns {status, leases, waiters, ms until the earliest lease runs out (-1 = none)}; status is
// 1 granted, 0 not granted (in line when queued), -1 the line is full.
var acquireScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local held = redis.call('ZCARD', KEYS[1])
local waiting = redis.call('ZCARD', KEYS[2])
local queued = redis.call('ZSCORE', KEYS[2], ARGV[1])
local free = tonumber(ARGV[2]) - held
if (queued and free > 0) or (not queued and free > waiting) then
	redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])
	redis.call('PEXPIRE', KEYS[1], ttl)
	if queued then
		redis.call('ZREM', KEYS[2], ARGV[1])
		waiting = waiting - 1
	end
	return {1, held + 1, waiting, ttl}
end
local soonest = -1
local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if first[2] then
	soonest = tonumber(first[2]) - now
end
if ARGV[4] ~= 'queue' then
	return {0, held, waiting, soonest}
end
if not queued then
	local line = tonumber(ARGV[5])
	if line > 0 and waiting >= line then
		return {-1, held, waiting, soonest}
	end
	waiting = waiting + 1
end
redis.call('ZADD', KEYS[2], now + ttl, ARGV[1])
redis.call('PEXPIRE', KEYS[2], ttl)
return {0, held, waiting, soonest}
`)

// releaseScript gives a lease back (and drops the member from the line, for a waiter that
// gives up or a lease whose grant never reached its replica), then tells the replicas when
// someone waits: the connection id goes out on the channel.
//
// KEYS: leases, waiters. ARGV: member, channel, connection id. Returns 1 when the lease was
// still held.
var releaseScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local removed = redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
if removed == 1 and redis.call('ZCOUNT', KEYS[2], now, '+inf') > 0 then
	redis.call('PUBLISH', ARGV[2], ARGV[3])
end
return removed
`)

// renewScript extends this replica's leases of one connection. A lease that ran out (renewals
// failed for a whole lease time, or Redis restarted empty) is taken again when the connection
// has room, since its request still runs upstream; otherwise it is lost.
//
// KEYS: leases, waiters. ARGV: lease ms, cap, members. Returns {leases, waiters, then per
// member 1 renewed, 2 taken again, 0 lost}.
var renewScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[1])
local cap = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local out = {0, 0}
for i = 3, #ARGV do
	if redis.call('ZSCORE', KEYS[1], ARGV[i]) then
		redis.call('ZADD', KEYS[1], now + ttl, ARGV[i])
		out[#out + 1] = 1
	elseif redis.call('ZCARD', KEYS[1]) < cap then
		redis.call('ZADD', KEYS[1], now + ttl, ARGV[i])
		out[#out + 1] = 2
	else
		out[#out + 1] = 0
	end
end
redis.call('PEXPIRE', KEYS[1], ttl)
out[1] = redis.call('ZCARD', KEYS[1])
out[2] = redis.call('ZCARD', KEYS[2])
return out
`)

// countScript reads how many leases and waiters a connection has now.
//
// KEYS: leases, waiters. Returns {leases, waiters}.
var countScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
return {redis.call('ZCOUNT', KEYS[1], '(' .. now, '+inf'), redis.call('ZCOUNT', KEYS[2], '(' .. now, '+inf')}
`)
