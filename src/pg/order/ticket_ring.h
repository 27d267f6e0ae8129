/*
 * order/ticket_ring.h: the ring of tickets at which the callers of one
 * thing queue, and from which a leader takes every ticket queued at that
 * moment as one batch, serves the batch with one round trip, and answers
 * each ticket. Both orderings batch their callers so: a 'quorum' gate
 * (quorum_order.cpp: one register claim per batch) and a 'cluster' route
 * (lease_route.cpp: one statement to the lease holder per batch).
 *
 * A ticket is QUEUED, then SENT (taken into a batch), then ANSWERED, and
 * FREE again once its caller collected the answer. A caller that gives up
 * (an error, a cancel, an exit) abandons its ticket: unsent or answered, it
 * is free at once; sent, the answer frees it. So a slot is reused only
 * when nobody will read it, and a ticket is answered at most once. Tickets
 * are taken in their order, so every call of a batch began before the
 * batch was sent (that is what makes a batch as good as one call for the
 * orderings' promises).
 *
 * A batch that fails gives each of its callers the error its leader got,
 * whole (remote_error.h: SQLSTATE, message, detail and hint). A full error
 * per ticket would cost megabytes of shared memory for errors that are
 * rare, so the ring keeps HILO_TICKET_ERRORS of them, each shared by the
 * tickets answered with it and free again once the last of those is
 * collected or abandoned. A batch that finds none free (that many failed
 * batches whose callers have not yet read their answers) answers without
 * one, and its user falls back on what its Answer holds.
 *
 * What the ring does not decide is left to its user: who may lead and
 * when, how callers sleep and are woken (a latch per ticket is kept for
 * those that wake callers one by one), what a request and an answer hold.
 * It lives in shared memory inside its user's structure, zeroed at start
 * (FREE is 0), and every call is made under that structure's spinlock:
 * the functions are short, never ereport and never allocate.
 */
#ifndef HILO_PG_ORDER_TICKET_RING_H
#define HILO_PG_ORDER_TICKET_RING_H

extern "C" {
#include "storage/latch.h"
}

#include "../remote_error.h"

/* Full errors a ring keeps for the tickets of its failed batches. */
#define HILO_TICKET_ERRORS 4

/* What a claim's decision does with a QUEUED ticket. */
enum HiloTicketVerdict {
    HILO_TICKET_TAKE, /* into the batch: SENT */
    HILO_TICKET_FAIL, /* answered at once with the answer the decision wrote */
    HILO_TICKET_STOP  /* this one and those after it stay QUEUED, for the next batch */
};

template <typename Request, typename Answer, int N>
struct HiloTicketRing {
    enum State { FREE = 0, QUEUED, SENT, ANSWERED };

    struct Slot {
        uint64 number; /* the ticket in this slot */
        int state;
        bool abandoned; /* its caller left while it was SENT: the answer frees it */
        int error;      /* ANSWERED: 1 + the index of its error in errors[]; 0: none */
        Latch *latch;   /* its caller's */
        Request request;
        Answer answer;
    };

    struct SharedError {
        int readers; /* ANSWERED tickets that hold it: 0, free */
        HiloRemoteError error;
    };

    uint64 next_ticket;  /* tickets handed out */
    uint64 claimed_upto; /* tickets below this one were taken or failed */
    int taken;           /* slots not FREE */
    Slot slots[N];
    SharedError errors[HILO_TICKET_ERRORS];

    /* No ticket in use. */
    bool idle() const { return taken == 0; }
    /* Tickets that may still be QUEUED (some may have been abandoned). */
    uint64 unclaimed() const { return next_ticket - claimed_upto; }

    /* A new QUEUED ticket for `request` (*ticket); false when the ring is
     * full. */
    bool queue(const Request &request, Latch *latch, uint64 *ticket)
    {
        Slot *s = &slots[next_ticket % N];
        if (unclaimed() >= (uint64)N || s->state != FREE)
            return false;
        s->number = next_ticket;
        s->state = QUEUED;
        s->abandoned = false;
        s->error = 0;
        s->latch = latch;
        s->request = request;
        taken++;
        *ticket = next_ticket++;
        return true;
    }

    /* Whether `ticket` waits for its answer (QUEUED or SENT). */
    bool pending(uint64 ticket) const
    {
        const Slot *s = &slots[ticket % N];
        return s->number == ticket && (s->state == QUEUED || s->state == SENT);
    }

    /*
     * Takes the tickets QUEUED now, in their order: decide(ticket,
     * request, &answer) says what becomes of each (a failed one's latch
     * goes to wake(latch)). Returns how many were taken.
     */
    template <typename Decide, typename Wake>
    int claim(Decide decide, Wake wake)
    {
        int n = 0;
        uint64 k = claimed_upto;
        for (; k < next_ticket; k++) {
            Slot *s = &slots[k % N];
            if (s->number != k || s->state != QUEUED)
                continue;
            HiloTicketVerdict v = decide(k, s->request, &s->answer);
            if (v == HILO_TICKET_STOP)
                break;
            if (v == HILO_TICKET_FAIL) {
                s->state = ANSWERED;
                wake(s->latch);
                continue;
            }
            s->state = SENT;
            n++;
        }
        claimed_upto = k;
        return n;
    }

    /* A copy of `error` for the answers of one failed batch: its handle
     * for answer(), or -1 when every copy is still read (then answer
     * without one). Until answer() gives it a reader, the next call may
     * hand the same one out again: answer the batch under the same lock. */
    int keep_error(const HiloRemoteError &error)
    {
        for (int i = 0; i < HILO_TICKET_ERRORS; i++)
            if (errors[i].readers == 0) {
                errors[i].error = error;
                return i;
            }
        return -1;
    }

    /* Answers the SENT `ticket` (with the error keep_error() kept, or -1):
     * its caller's latch to wake, or NULL when nobody waits (abandoned:
     * the slot is free). */
    Latch *answer(uint64 ticket, const Answer &answer, int error = -1)
    {
        Slot *s = &slots[ticket % N];
        Assert(s->number == ticket && s->state == SENT);
        if (s->abandoned) {
            release(s);
            return NULL;
        }
        s->answer = answer;
        s->state = ANSWERED;
        if (error >= 0) {
            s->error = 1 + error;
            errors[error].readers++;
        }
        return s->latch;
    }

    /* The answer to `ticket` into *out (and the error it was answered with
     * into *error when given, sqlerrcode 0 when none), and its slot freed;
     * false while it waits. */
    bool collect(uint64 ticket, Answer *out, HiloRemoteError *error = NULL)
    {
        Slot *s = &slots[ticket % N];
        if (s->number != ticket || s->state != ANSWERED)
            return false;
        *out = s->answer;
        if (error != NULL) {
            if (s->error > 0)
                *error = errors[s->error - 1].error;
            else
                error->sqlerrcode = 0;
        }
        release(s);
        return true;
    }

    /* Its caller gives `ticket` up, or answers it itself (a leader's own):
     * free now, or, SENT, once answered. */
    void abandon(uint64 ticket)
    {
        Slot *s = &slots[ticket % N];
        if (s->number != ticket || s->state == FREE)
            return;
        if (s->state == SENT)
            s->abandoned = true;
        else
            release(s);
    }

    const Request &request(uint64 ticket) const { return slots[ticket % N].request; }

  private:
    void release(Slot *s)
    {
        if (s->error > 0)
            errors[s->error - 1].readers--;
        s->error = 0;
        s->state = FREE;
        s->abandoned = false;
        taken--;
    }
};

#endif /* HILO_PG_ORDER_TICKET_RING_H */
