#if !FUZZING
import FuzzReplay

@main
struct ReplayIPCInputs {
    static func main() { replayInputs(tool: "fuzz-ipc", through: fuzz) }
}
#endif
