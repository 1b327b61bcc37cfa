import Dispatch
import Synchronization

/// Computes one output per input on worker threads while the caller prepares the next batch.
///
/// Each worker is a job on a ``WorkerPool`` and takes the next indices (a few at a time) from a
/// shared counter, so two batches in flight keep every thread of the pool busy and a slow item
/// does not leave a worker idle. Each worker has its own `State` (a reusable buffer, say), made by `makeState`.
package final class ParallelBatch<Input: Sendable, Output: Sendable, State>: @unchecked Sendable {
    package let inputs: [Input]
    // Written by workers at distinct indices before `group` is left; read after `wait()`.
    private let outputs: UnsafeMutableBufferPointer<Output?>
    private let next = Atomic<Int>(0)
    private let group = DispatchGroup()

    package init(_ inputs: [Input]) {
        self.inputs = inputs
        outputs = .allocate(capacity: inputs.count)
        outputs.initialize(repeating: nil)
    }

    deinit {
        group.wait()
        outputs.deinitialize()
        outputs.deallocate()
    }

    /// Starts one worker per thread of `pool`, running `work` over the inputs. Each worker's
    /// state is handed to `done` when it has no more inputs (to keep it for the next batch).
    package func start(
        on pool: WorkerPool, makeState: @escaping @Sendable () -> State,
        work: @escaping @Sendable (inout State, Input) -> Output,
        done: (@Sendable (consuming State) -> Void)? = nil
    ) {
        let count = inputs.count
        // Indices are taken a few at a time: one shared counter update per tile, and neighbouring
        // outputs written by different workers (one cache line bouncing between cores), cost the
        // workers of a 50,000-small-tile import more than running on one thread did. Few enough
        // that the workers still finish together (at least four takes per worker).
        let take = max(1, min(Self.maximumTake, count / (4 * pool.size)))
        for _ in 0..<min(pool.size, max(1, count)) {
            group.enter()
            pool.submit {
                defer { self.group.leave() }
                var state = makeState()
                while true {
                    let first = self.next.add(take, ordering: .relaxed).oldValue
                    guard first < count else { break }
                    for i in first..<min(first + take, count) {
                        self.outputs[i] = work(&state, self.inputs[i])
                    }
                }
                done?(state)
            }
        }
    }

    /// The most inputs a worker takes at once.
    package static var maximumTake: Int { 16 }

    /// Waits for the workers; every output is set afterwards.
    package func wait() { group.wait() }

    /// Output `index`, after ``wait()``.
    package subscript(index: Int) -> Output {
        guard let output = outputs[index] else { preconditionFailure("ParallelBatch read before wait()") }
        return output
    }
}
