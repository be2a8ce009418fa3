/*
 * fb303 FacebookService: the common status/counters interface that Hive's
 * ThriftHiveMetastore service extends. Written for this project from the
 * interface's published shape (method names, field ids and types must match
 * what HMS serves, since they are part of the wire contract).
 */

namespace java com.facebook.fb303
namespace py fb303

/** Health of a service, as returned by getStatus(). */
enum fb_status {
  DEAD = 0,
  STARTING = 1,
  ALIVE = 2,
  STOPPING = 3,
  STOPPED = 4,
  WARNING = 5,
}

/** Status, counters and options of a long-running service. */
service FacebookService {

  /** Descriptive name of the service. */
  string getName(),

  /** Version string of the service. */
  string getVersion(),

  /** Current health of the service. */
  fb_status getStatus(),

  /** Human-readable explanation of the current status. */
  string getStatusDetails(),

  /** Every counter the service keeps, by name. */
  map<string, i64> getCounters(),

  /** One counter by name. */
  i64 getCounter(1: string key),

  /** Set an option by key. */
  void setOption(1: string key, 2: string value),

  /** Read an option by key. */
  string getOption(1: string key),

  /** Every option, by key. */
  map<string, string> getOptions(),

  /** CPU profile over the given number of seconds (pprof format). */
  string getCpuProfile(1: i32 profileDurationInSec),

  /** Unix time, in seconds, when the service started. */
  i64 aliveSince(),

  /** Ask the service to reload its configuration (no reply). */
  oneway void reinitialize(),

  /** Ask the service to stop (no reply). */
  oneway void shutdown(),
}
