import NIOCore

/// The events of one connection, in the order the daemon sent them.
///
/// One consumer only: iterate it from one task (a second iterator traps).
/// It ends without error after `IPCClient.close()`, and throws
/// `IPCClientError.connectionLost` when the daemon goes away.
///
/// Back-pressure: up to `highWatermark` events wait here for the consumer.
/// Beyond that the client stops reading its socket, so the daemon stops
/// writing and holds the messages in its store (its per-session flow control
/// takes over) — except while a request waits for its reply, because the
/// reply sits behind those events in the same stream. A program that
/// attaches sessions must therefore keep consuming its events.
public struct IPCEvents: AsyncSequence, Sendable {
    public typealias Element = IPCEvent

    static let lowWatermark = 64
    static let highWatermark = 1024

    typealias Producer = NIOThrowingAsyncSequenceProducer<
        IPCEvent, any Error, NIOAsyncSequenceProducerBackPressureStrategies.HighLowWatermark, ReadResumer
    >

    let producer: Producer

    public struct AsyncIterator: AsyncIteratorProtocol {
        var base: Producer.AsyncIterator

        public mutating func next() async throws -> IPCEvent? {
            try await base.next()
        }
    }

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(base: producer.makeAsyncIterator())
    }

    /// Tells the connection's handler when the consumer wants events again,
    /// so that it reads from the socket once more. It finds the handler
    /// through the channel rather than holding it: the channel is the one
    /// thing here that is safe to share across threads.
    struct ReadResumer: NIOAsyncSequenceProducerDelegate {
        let channel: any Channel

        func produceMore() {
            channel.eventLoop.execute {
                try? channel.pipeline.syncOperations.handler(type: IPCClientChannelHandler.self).consumerWantsEvents()
            }
        }

        func didTerminate() {
            // The consumer stopped iterating: events from now on are dropped,
            // so reading must not wait for it any more.
            produceMore()
        }
    }
}
