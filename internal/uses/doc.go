// Package uses counts a redirector replica's uses of links and enforces
// maxUses across replicas.
//
// A use is a GET answered with a redirect. Each replica counts its uses in
// memory (a Counter per link: an atomic add on the request path) and writes
// them to the link's status.uses in batches: Flush visits the links that
// served since its last round, at most once per link per flush interval and
// at most WritesPerSecond writes per replica; what does not fit waits for
// the next round, so nothing is dropped while the process lives.
//
// The counts live in the ShortLink's own status, written as merge patches
// with the resourceVersion as precondition (optimistic concurrency): a lost
// race is a 409 that the writer retries on a fresh read, never a lost count.
//
// A link with maxUses is served only from quota this replica reserved in
// status.useReservations (a block at a time, sized to what it serves in a
// lease and shrinking as the limit nears), so that
// uses + every reservation's quota <= maxUses, and the redirects of all
// replicas never exceed maxUses whatever the concurrency, crashes or API
// outages: a replica that cannot reserve answers 503. Every read and write
// takes a token of the replica's budget first (WritesPerSecond, with a
// burst of ReserveBurst for requests), which bounds what clicks on any
// number of distinct links can make the API server do. The rules that keep
// that bound, each tested:
//
//   - Taking back. A reservation lasts a lease from the moment its holder
//     sent the write, on the holder's monotonic clock; it renews it before
//     it ends (the uses served meanwhile ride on the renewal) or stops
//     serving it. Another replica takes it back only after
//     seeing it unchanged for a lease plus a flush interval on its own
//     clock, and counts its whole quota as used: whatever the holder served
//     or still serves from it is inside that count, so a take-back, early
//     or late, never lets the link serve past maxUses. Only local clocks are
//     read, so clock skew cannot make a replica take back a reservation
//     that is still in use (which would count quota nobody served). For the
//     same reason there is no safety margin before a lease ends: a holder
//     serving up to its lease's end serves quota nobody else can get.
//   - A lowered limit. A replica stops serving its quota as soon as its
//     informer shows a maxUses lower than the one its reservation was
//     written under; its next request reserves on a live read, where the
//     planner shrinks the reservation to what fits.
//   - Counting. A request takes quota and then counts the use; a release
//     stops the quota and waits for requests between the two, so the count
//     it writes holds every use taken. The pending count never goes below 0.
//   - Identity. A counter belongs to one uid: a link deleted and created
//     again (even when the informer sees it as one update) starts afresh,
//     and a write whose live read shows another uid is dropped.
//   - Stale versions. A first reservation may be written on the informer's
//     version of a link that shows none, never without its resourceVersion
//     as the precondition: if the version is stale, the write conflicts and
//     is retried on a live read.
//   - Forwarding (forward.go). A request on a replica without quota may be
//     served from the quota of another replica (Forwarder, TakeHeld), which
//     counts it as one of its own: no quota is created, so no bound changes.
//     Only an answer the holder authenticated counts (package peer); a
//     forwarded use written to the holder and not answered under its MAC
//     may be counted there and served nowhere (Lost, at most one a request
//     in flight).
//   - Asking through the API server (forward.go). A replica whose forward
//     found the holder unreachable (nothing answers at its address, or the
//     replica there proves it cannot take this one's requests) marks the
//     holder's reservation returnRequested in the reservation write that
//     found no quota; the holder returns its unused quota when its
//     informer shows the mark (roundWriters returns at a time: asked for
//     many links at once, the last is not returned after the askers would
//     take it back). Congestion, slowness and the forwarder's own limits
//     (NotForwarded, Lost) mark nothing.
//   - Rounds (flush.go). A flush round writes roundWriters links at a time,
//     paced by the budget: one at a time, an API server slow to answer
//     would let the round's last leases lapse while their holder lives.
//   - The last use (forward.go). A reservation used up is written at once,
//     so a limit reached shows in status within a write.
//   - Releasing (release.go). A stopping replica writes every link it holds,
//     releaseWorkers at a time, within its shutdown timeout; a write that
//     lost every race to the other replicas is tried again until then.
//   - Reserving ahead. A new limited link nobody has used or reserved is
//     reserved ahead of its first click by the same write as any first
//     reservation, which conflicts if another replica reserved it first.
//   - Lost responses. A write whose response is lost (a timeout after the
//     API server may have applied it) is recognised on the next live read by
//     the expiresAt it wrote, and is not applied twice.
//
// status.uses never reads low while a replica lives. It reads high by a
// taken-back reservation's unused quota (its holder may have served it),
// for a write whose response was lost and which carries no marker (a
// count of a link without maxUses, or a limited link's first reservation
// that was then taken back) by that write's uses, and by the forwarded
// uses whose answers were lost (served there, redirected nowhere).
//
// The files follow the rules: uses.go (taking and counting, Attach),
// reserve.go (reservations and their writes), plan.go (the planner, and
// taking back), settle.go (lost responses), flush.go (the rounds),
// budget.go (the write budget), ahead.go, forward.go, release.go.
package uses
