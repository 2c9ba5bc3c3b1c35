import NIOCore

/// The `push` service and the `push` command: timed streams of generated DATA.
extension ServerCore {
    func startPush(_ key: SessionKey, count: Int, size: Int, rate: Int) {
        let id = nextPushJobID
        nextPushJobID += 1
        pushJobs[id] = PushJob(key: key, remaining: count, size: size, rate: rate)
        runPush(id)
    }

    private func runPush(_ id: Int) {
        guard var job = pushJobs[id], !stopping else { return }
        let (interval, perTick) = job.schedule
        for _ in 0..<min(perTick, job.remaining) {
            job.produced += 1
            let body = PushJob.payload(session: job.key.id, number: job.produced, size: job.size)
            guard book.enqueue(job.key, compressed: false, body: body) != nil else {
                // The session was closed for good: the stream ends with it.
                pushJobs[id] = nil
                return
            }
            job.remaining -= 1
        }
        scheduleFlush()
        guard job.remaining > 0 else {
            pushJobs[id] = nil
            return
        }
        job.timer = loop.assumeIsolated().scheduleTask(in: interval) { self.runPush(id) }
        pushJobs[id] = job
    }

    func cancelPushJobs() {
        for job in pushJobs.values { job.timer?.cancel() }
        pushJobs.removeAll()
    }
}
