import Dispatch
import Synchronization

/// Computes one output per input on worker threads while the caller prepares the next batch.
///
/// Each worker is a job on a ``WorkerPool`` and takes the next index from a shared counter, so
/// two batches in flight keep every thread of the pool busy and a slow item does not leave a
/// worker idle. Each worker has its own `State` (a reusable buffer, say), made by `makeState`.
final class ParallelBatch<Input: Sendable, Output: Sendable, State>: @unchecked Sendable {
    let inputs: [Input]
    // Written by workers at distinct indices before `group` is left; read after `wait()`.
    private let outputs: UnsafeMutableBufferPointer<Output?>
    private let next = Atomic<Int>(0)
    private let group = DispatchGroup()

    init(_ inputs: [Input]) {
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
    func start(on pool: WorkerPool, makeState: @escaping @Sendable () -> State,
               work: @escaping @Sendable (inout State, Input) -> Output,
               done: (@Sendable (consuming State) -> Void)? = nil) {
        let count = inputs.count
        for _ in 0..<min(pool.size, max(1, count)) {
            group.enter()
            pool.submit {
                defer { self.group.leave() }
                var state = makeState()
                while true {
                    let i = self.next.add(1, ordering: .relaxed).oldValue
                    guard i < count else { break }
                    self.outputs[i] = work(&state, self.inputs[i])
                }
                done?(state)
            }
        }
    }

    /// Waits for the workers; every output is set afterwards.
    func wait() { group.wait() }

    /// Output `index`, after ``wait()``.
    subscript(index: Int) -> Output {
        guard let output = outputs[index] else { preconditionFailure("ParallelBatch read before wait()") }
        return output
    }
}
