/* Work and completion queue entries: fixed-size plain data with no pointers to engine state,
 * so that QP rings can later live in memory shared with a node agent unchanged. Addresses of
 * user buffers are carried as integers (they are read by the NIC, never dereferenced as
 * engine pointers across a process boundary). */
#ifndef SRCNIC_WQE_H
#define SRCNIC_WQE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Where a request goes: a connection slot of the local NIC (which names the remote NIC) and a
 * QP on that NIC. Created by srcnic_dest_create(); 8 bytes, copied freely. */
typedef struct srcnic_dest {
    uint32_t peer;        /* local peer-table slot and generation (opaque) */
    uint32_t qpn;         /* remote QP number */
} srcnic_dest_t;

typedef enum srcnic_opcode {
    SRCNIC_OP_SEND  = 1,  /* message into the remote QP's next posted receive buffer */
    SRCNIC_OP_WRITE = 2,  /* RDMA write to (rkey, remote_addr) */
    SRCNIC_OP_READ  = 3,  /* RDMA read from (rkey, remote_addr) into the local gather list */
    SRCNIC_OP_RECV  = 4   /* CQE only: a received SEND */
} srcnic_opcode_t;

enum {
    SRCNIC_WQE_FLAG_INLINE   = 1u << 0, /* payload is in inline_data, not in the gather list */
    SRCNIC_WQE_FLAG_LAZY_ACK = 1u << 1, /* nothing waits for its completion soon (its payload
                                         * was copied): the engine does not ask the peer for a
                                         * prompt acknowledgement of it; one rides on the peer's
                                         * next packet back, or comes within the peer's
                                         * acknowledgement delay (PROTOCOL.md 5.3) */
    SRCNIC_WQE_FLAG_CANCELED = 1u << 2  /* carried out nowhere: completes CANCELED when the NIC
                                         * takes it, in ring order (its completion may come
                                         * before those of earlier requests still in flight);
                                         * for a caller that goes on posting for a destination
                                         * whose work it cancelled */
};

#define SRCNIC_WQE_MAX_SGE      6     /* gather entries in one WQE */
#define SRCNIC_WQE_INLINE_MAX   128   /* bytes of inline payload in one WQE */

typedef struct srcnic_sge {
    uint64_t addr;        /* start of the local buffer (virtual address) */
    uint32_t length;      /* bytes */
    uint32_t reserved;
} srcnic_sge_t;

/* A send-queue entry (176 bytes). */
typedef struct srcnic_wqe {
    uint64_t      wr_id;        /* returned unchanged in the CQE */
    uint8_t       opcode;       /* srcnic_opcode_t: SEND, WRITE or READ */
    uint8_t       flags;        /* SRCNIC_WQE_FLAG_* */
    uint8_t       num_sge;      /* gather entries used (READ: scatter entries) */
    uint8_t       reserved0;
    uint32_t      imm;          /* SEND: immediate value delivered in the receiver's CQE */
    srcnic_dest_t dest;         /* destination NIC and QP */
    uint64_t      remote_addr;  /* WRITE/READ: remote virtual address */
    uint64_t      rkey;         /* WRITE/READ: remote key of the region */
    uint32_t      inline_len;   /* bytes in inline_data when FLAG_INLINE */
    uint32_t      tag;          /* the caller's label (e.g. its endpoint), for srcnic_qp_cancel */
    union {
        srcnic_sge_t sge[SRCNIC_WQE_MAX_SGE];
        uint8_t      inline_data[SRCNIC_WQE_INLINE_MAX];
    } u;
} srcnic_wqe_t;

/* A receive-queue entry: one buffer for one incoming SEND. */
typedef struct srcnic_recv_wqe {
    uint64_t wr_id;       /* returned in the RECV CQE */
    uint64_t addr;        /* buffer start */
    uint32_t length;      /* buffer size, bytes */
    uint32_t reserved;
} srcnic_recv_wqe_t;

/* A completion (32 bytes). */
typedef struct srcnic_cqe {
    uint64_t      wr_id;     /* from the WQE or receive WQE */
    int16_t       status;    /* srcnic_status_t: OK or the reason it failed */
    uint8_t       opcode;    /* srcnic_opcode_t of the completed work (RECV for receives) */
    uint8_t       reserved;
    uint32_t      byte_len;  /* RECV: bytes placed; SEND/WRITE/READ: message length */
    uint32_t      imm;       /* RECV: the sender's immediate */
    uint32_t      src_qpn;   /* RECV: the sender's QP number */
    uint32_t      src_peer;  /* RECV: the local peer slot of the sending NIC (from a QP of this
                              * NIC that nothing else of its QP preceded: its slot of itself) */
    uint32_t      reserved1;
} srcnic_cqe_t;

#ifdef __cplusplus
}
#endif

#endif
