# msg_trace.py RT_DIR MIN_BYTES: medians from the two ranks' msg_trace.c logs (see msg_trace.c); only
# calls that moved at least MIN_BYTES count as a message's, the first tenth skipped as warm-up.
import struct, sys, statistics as st
def load(p):
    b = open(p, 'rb').read(); n = len(b) // 32
    ev = [struct.unpack_from('<QQqii', b, i * 32) for i in range(n)]
    cal = ev[0]; hz = (cal[1] - cal[0]) / (cal[2] / 1e9)
    return ev[1:], hz
d = sys.argv[1]; minb = int(sys.argv[2])
e0, hz = load(d + '/rt.0.bin'); e1, _ = load(d + '/rt.1.bin')
us = lambda t: t / hz * 1e6
def stats(ev, name):
    # data receives (>= minb bytes), sends of >= minb
    gaps, sends, recvs, wait = [], [], [], []
    last_recv = None; last_send_leave = None
    for (a, b, by, k, _) in ev:
        if k == 2 and by >= minb:
            recvs.append(us(b - a))
            if last_send_leave is not None: wait.append(us(b - last_send_leave)); last_send_leave = None
            last_recv = b
        elif k == 1 and by >= minb:
            sends.append(us(b - a))
            if last_recv is not None: gaps.append(us(a - last_recv)); last_recv = None
            last_send_leave = b
    n = len(gaps); cut = n // 10
    f = lambda x: '%.2f' % st.median(x[len(x)//10:]) if x else '-'
    print(f"{name}: n={n} recv->send (user) {f(gaps)}  send syscall {f(sends)}  data recv syscall {f(recvs)}  send leave->data recv leave {f(wait)}")
stats(e0, 'rank0'); stats(e1, 'rank1')
# transit: send enter on one rank -> the other's next data recv leave
def transit(a, b):
    sends = [x[0] for x in a if x[3] == 1 and x[2] >= minb]
    recvs = [x[1] for x in b if x[3] == 2 and x[2] >= minb]
    out = []; j = 0
    for s in sends:
        while j < len(recvs) and recvs[j] < s: j += 1
        if j < len(recvs): out.append(us(recvs[j] - s))
    out = out[len(out)//10:]
    return st.median(out) if out else float('nan')
print("transit 0->1 %.2f  1->0 %.2f (send enter -> peer's data recv leave)" % (transit(e0, e1), transit(e1, e0)))
