# Sourced by the benchmarks that need Kafka (bench/kafka.sh, bench/global-merge.sh): KRaft
# brokers of Apache Kafka from Maven Central (the classpath scripts/test writes), on loopback.
#
#   start_brokers COUNT WORK TOPIC PARTITIONS [MIN_INSYNC]
#     starts COUNT brokers (ids 1.., PLAINTEXT 127.0.0.1:19191.., controllers 19291..) with their
#     data in WORK, pinned to CPU 1, their pids appended to the caller's `pids` array, and makes
#     TOPIC with PARTITIONS partitions replicated COUNT times (min.insync.replicas MIN_INSYNC,
#     COUNT - 1 by default, at least 1); sets `bootstrap` to the brokers' addresses.

kafka_classpath() {
  local file=target/tools/kafka.classpath
  if [ ! -s "$file" ]; then
    mkdir -p target/tools
    mvn -q -f crates/histd/tests/kafka/pom.xml dependency:build-classpath -Dmdep.outputFile="$PWD/$file"
  fi
  cat "$file"
}

start_brokers() {
  local count=$1 work=$2 topic=$3 partitions=$4
  local insync=${5:-$(( count > 1 ? count - 1 : 1 ))}
  local classpath voters="" id
  classpath=$(kafka_classpath)
  bootstrap=""
  for id in $(seq "$count"); do
    voters+="${voters:+,}$id@127.0.0.1:1929$id"
    bootstrap+="${bootstrap:+,}127.0.0.1:1919$id"
  done
  for id in $(seq "$count"); do
    cat > "$work/broker$id.properties" <<PROPERTIES
process.roles=broker,controller
node.id=$id
listeners=PLAINTEXT://127.0.0.1:1919$id,CONTROLLER://127.0.0.1:1929$id
advertised.listeners=PLAINTEXT://127.0.0.1:1919$id
controller.listener.names=CONTROLLER
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
controller.quorum.voters=$voters
log.dirs=$work/data$id
offsets.topic.replication.factor=$count
offsets.topic.num.partitions=3
transaction.state.log.replication.factor=$count
transaction.state.log.min.isr=$insync
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=false
PROPERTIES
    java -cp "$classpath" kafka.tools.StorageTool format -t aGlzdGQtYmVuY2gtMDAwMQ -c "$work/broker$id.properties" >/dev/null
    taskset -c 1 java -Xmx512m -XX:+UseSerialGC -cp "$classpath" kafka.Kafka "$work/broker$id.properties" >"$work/broker$id.log" 2>&1 &
    pids+=($!)
  done
  for _ in $(seq 120); do
    java -cp "$classpath" org.apache.kafka.tools.TopicCommand --bootstrap-server "$bootstrap" --create --topic "$topic" \
      --partitions "$partitions" --replication-factor "$count" --config min.insync.replicas="$insync" >/dev/null 2>&1 && return 0
    sleep 1
  done
  echo "the brokers did not take topic $topic" >&2
  return 1
}
