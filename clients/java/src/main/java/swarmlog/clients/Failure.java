package swarmlog.clients;

/** Why the producer stops, in one line, with the exit status the README gives it. */
final class Failure extends Exception {
    final int status;

    private Failure(int status, String message) {
        super(message);
        this.status = status;
    }

    /** A setting that is wrong or missing (exit status 3). */
    static Failure config(String message) {
        return new Failure(3, message);
    }

    /** The brokers cannot be reached, or refuse the credentials or the certificate (exit status 4). */
    static Failure service(String message) {
        return new Failure(4, message);
    }

    /** Anything else that went wrong while producing (exit status 1). */
    static Failure failed(String message) {
        return new Failure(1, message);
    }
}
