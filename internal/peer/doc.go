// Package peer is the redirector replicas' peer protocol: a replica without
// quota for a link with maxUses asks the replica holding it (the peer
// address in that replica's reservation) to serve one use from its quota.
//
// A request is POST /v1/uses/<namespace>/<code>/<uid>, with no body. The
// answer is 204 (served: the use is counted there), 409 (no quota there),
// 410 (the link does not answer: expired or used up) or 404 (no such link,
// or another object under its code).
//
// Nothing on the pod network is trusted: an address is not an identity (a
// pod may get a killed replica's IP), and any pod can send requests. Both
// directions are authenticated with the installation's peer key, 32 random
// bytes in a Secret that the manager creates (KeyCreator), never on the
// wire:
//
//   - A request names the holder it is for (the reservation's holder), a
//     fresh nonce and the sender's time, under an HMAC-SHA256 of the key. A
//     holder serves only requests for itself, within MaxSkew of its clock
//     (the newest reading it has seen: a clock stepped back reopens
//     nothing), never the same one twice (a replayed request is refused),
//     and only with a valid MAC: only a redirector of the installation can
//     spend a use through the peer port.
//   - An answer to a request with a valid MAC carries an HMAC of the
//     holder's name, the request's nonce and path and the result: served,
//     refused, gone, unknown, or why it was not taken (busy: the replay
//     memory is full; misaddressed; stale). The client believes nothing
//     else, and tells apart (Client.TakeFrom) what sent nothing the holder
//     could take (not forwarded: our own connections busy, the holder's
//     port at its connection limits), what may have reached it (lost: an
//     impostor's answer, one changed on the way, none in time), and a
//     holder that cannot be reached at all (unreachable: nothing answers
//     at its address, or the replica there proves it cannot take our
//     requests), which alone is asked, through the API server, to return
//     its quota (uses).
//
// The peer port's connections are bounded so that clients without the key
// cannot hold them (ServerOptions, FirstByteTimeout).
//
// What the key cannot stop: a replica of the installation lying (it writes
// status too, so it could anyway), and a request whose answer is lost after
// the holder served it: that use is counted and served to nobody (status.uses
// reads high by one a request in flight; see Client).
package peer
