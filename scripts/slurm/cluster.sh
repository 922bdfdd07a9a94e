#!/usr/bin/env bash
# A one-machine SLURM cluster (Debian 12's slurm-wlm 22.05, munge, MariaDB) to run the workflow's SLURM
# profiles against a real scheduler. No systemd (containers): every daemon is started directly and tracked by a
# pid file under the state directory ($DSE_SLURM_DIR, default /tmp/dse-slurm), which also holds the config,
# the logs, the spool directories and the accounting database. Run as root.
#
#   scripts/slurm/cluster.sh install|start|stop|status|env
#   eval "$(scripts/slurm/cluster.sh env)"     # the client commands (sbatch, sacct, snakemake) need SLURM_CONF
#
# The node is this host (`hostname -s`) with the CPUs `slurmd -C` detects and two units of the GRES `board`
# (the measuring jobs' stand-in for a Jetson board); partition `debug`, account `dse` for root.
set -euo pipefail

DIR=${DSE_SLURM_DIR:-/tmp/dse-slurm}
DB_PORT=${DSE_SLURM_DB_PORT:-16033}  # MariaDB on 127.0.0.1, off 3306 so a system MariaDB is left alone
NODE=$(hostname -s)
CONF=$DIR/etc/slurm.conf
export SLURM_CONF=$CONF
MYCNF=$DIR/etc/my.cnf
MUNGE_DIR=$DIR/munge  # munged runs as user munge: its pid and log files need a directory it owns
# snakemake-executor-plugin-slurm-jobstep drops SLURM_CONF before its srun inside each job, so srun only finds
# the config at the compiled-in default path: link it there while the cluster runs
DEFAULT_CONF=/etc/slurm/slurm.conf

die() { echo "cluster.sh: $*" >&2; exit 1; }

pidfile() { if [[ $1 == munged ]]; then echo "$MUNGE_DIR/munged.pid"; else echo "$DIR/run/$1.pid"; fi; }
logfile() { if [[ $1 == munged ]]; then echo "$MUNGE_DIR/munged.log"; else echo "$DIR/log/$1.log"; fi; }

pid_alive() { [[ -s $1 ]] && kill -0 "$(cat "$1")" 2>/dev/null; }
alive() { pid_alive "$(pidfile "$1")"; }  # alive NAME: its pid file names a live process

fail() {  # fail NAME MESSAGE: show the end of NAME's log and stop
  echo "cluster.sh: $2; last lines of $(logfile "$1"):" >&2
  tail -n 30 "$(logfile "$1")" >&2 2>/dev/null || true
  exit 1
}

wait_until() {  # wait_until NAME SECONDS PID CMD...: poll CMD until it succeeds; give up early if PID (if any) dies
  local name=$1 secs=$2 pid=$3; shift 3
  for _ in $(seq $((secs * 4))); do
    "$@" >/dev/null 2>&1 && return 0
    [[ -z $pid ]] || kill -0 "$pid" 2>/dev/null || fail "$name" "$name exited during startup"
    sleep 0.25
  done
  fail "$name" "$name did not come up within ${secs}s"
}

cmd_install() {
  local pkgs=(slurm-wlm slurmdbd munge mariadb-server)
  export DEBIAN_FRONTEND=noninteractive
  # a no-op when installed; the package lists may be stale or missing (fresh container): refresh only then
  apt-get install -y "${pkgs[@]}" || { apt-get update && apt-get install -y "${pkgs[@]}"; }
}

write_config() {
  mkdir -p "$DIR"/{etc,run,log,spool/ctld,spool/d}
  # slurmd refuses a node whose declared hardware exceeds what it detects: take its own description
  local hw mem
  hw=$(env -u SLURM_CONF slurmd -C 2>/dev/null | head -1) || die "slurmd -C failed (is slurmd installed?)"
  mem=$(sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p' <<<"$hw")
  hw=$(sed -e 's/^NodeName=[^ ]* //' -e 's/ RealMemory=[0-9]*//' <<<"$hw")
  [[ -n $mem && -n $hw ]] || die "cannot parse 'slurmd -C'"

  cat >"$CONF" <<EOF
# written by scripts/slurm/cluster.sh; rewritten on every start
ClusterName=dse
# daemons find each other at 127.0.0.1: the host name need not resolve, only match hostname -s
SlurmctldHost=$NODE(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
# no mail server here
MailProg=/bin/true
StateSaveLocation=$DIR/spool/ctld
SlurmdSpoolDir=$DIR/spool/d
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
# no cgroups in a container
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/linux
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=1000
# a node that went down with its daemons comes back by itself on the next start
ReturnToService=2
# finished jobs stay visible to squeue for 5 min (the SLURM plugin may poll with squeue)
MinJobAge=300
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStorageEnforce=associations
# record the boards each job held (sacct AllocTRES)
AccountingStorageTRES=gres/board
GresTypes=board
NodeName=$NODE NodeAddr=127.0.0.1 $hw RealMemory=$((mem * 95 / 100)) Gres=board:2
PartitionName=debug Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF
  echo "Name=board Count=2" >"$DIR/etc/gres.conf"

  # the database password is made once and kept: the MariaDB user carries it
  [[ -s $DIR/etc/db.pass ]] || (umask 077; head -c 18 /dev/urandom | base64 >"$DIR/etc/db.pass")
  (umask 077; cat >"$DIR/etc/slurmdbd.conf" <<EOF
# written by scripts/slurm/cluster.sh; slurmdbd insists on mode 600
DbdHost=$NODE
DbdAddr=127.0.0.1
SlurmUser=root
AuthType=auth/munge
PidFile=$DIR/run/slurmdbd.pid
LogFile=$DIR/log/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DB_PORT
StorageUser=slurm
StoragePass=$(cat "$DIR/etc/db.pass")
StorageLoc=slurm_acct_db
EOF
  )
  chmod 600 "$DIR/etc/slurmdbd.conf"

  cat >"$MYCNF" <<EOF
[mysqld]
user=root
datadir=$DIR/mysql
socket=$DIR/run/mysqld.sock
pid-file=$DIR/run/mariadb.pid
log-error=$DIR/log/mariadb.log
port=$DB_PORT
bind-address=127.0.0.1
skip-name-resolve
# slurmdbd warns below these
innodb_buffer_pool_size=1G
innodb_lock_wait_timeout=900
[client]
socket=$DIR/run/mysqld.sock
user=root
EOF
}

link_default_conf() {
  local cur; cur=$(readlink "$DEFAULT_CONF" || true)
  if [[ -e $DEFAULT_CONF && ! -L $DEFAULT_CONF ]]; then
    die "$DEFAULT_CONF exists (a real SLURM installation?): not replacing it with a link to $CONF"
  fi
  if [[ -n $cur && $cur != "$CONF" ]] && pid_alive "${cur%/etc/slurm.conf}/run/slurmctld.pid"; then
    die "the cluster of ${cur%/etc/slurm.conf} is running: stop it first (DSE_SLURM_DIR=${cur%/etc/slurm.conf} $0 stop)"
  fi
  mkdir -p "$(dirname "$DEFAULT_CONF")"
  ln -sfn "$CONF" "$DEFAULT_CONF"
}

start_munge() {
  munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && return 0  # a munged is already serving (ours or the system's)
  if [[ ! -s /etc/munge/munge.key ]]; then
    mkdir -p /etc/munge
    mungekey --create --keyfile=/etc/munge/munge.key
  fi
  chown -R munge:munge /etc/munge && chmod 700 /etc/munge && chmod 400 /etc/munge/munge.key
  install -d -o munge -g munge -m 755 /run/munge
  install -d -o munge -g munge -m 700 "$MUNGE_DIR"
  runuser -u munge -- munged --pid-file="$MUNGE_DIR/munged.pid" --log-file="$MUNGE_DIR/munged.log" \
    --seed-file="$MUNGE_DIR/munged.seed" || fail munged "munged failed to start"
  wait_until munged 10 "" bash -c 'munge -n | unmunge'
}

start_mariadb() {
  alive mariadb && return 0
  if [[ ! -d $DIR/mysql/mysql ]]; then
    mariadb-install-db --defaults-file="$MYCNF" --auth-root-authentication-method=socket \
      >"$DIR/log/mariadb-install.log" 2>&1 || fail mariadb-install "mariadb-install-db failed"
  fi
  # setsid: out of the caller's session, so it outlives the shell that ran this script; $! is mariadbd itself
  setsid mariadbd --defaults-file="$MYCNF" >>"$DIR/log/mariadb.log" 2>&1 </dev/null &
  wait_until mariadb 30 $! mariadb-admin --defaults-file="$MYCNF" ping
  local pass; pass=$(cat "$DIR/etc/db.pass")
  mariadb --defaults-file="$MYCNF" <<EOF
CREATE DATABASE IF NOT EXISTS slurm_acct_db;
CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY '$pass';
ALTER USER 'slurm'@'127.0.0.1' IDENTIFIED BY '$pass';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';
EOF
}

start_slurm_daemon() {  # start_slurm_daemon NAME: the slurm daemons fork themselves and write their pid files
  alive "$1" && return 0
  rm -f "$(pidfile "$1")"
  "$1" >>"$(logfile "$1")" 2>&1 || fail "$1" "$1 failed to start"
  wait_until "$1" 15 "" alive "$1"
}

sacctmgr_add() {  # sacctmgr_add ENTITY NAME [ARGS...]: add unless present
  local what=$1 name=$2; shift 2
  [[ -n $(sacctmgr -n -P show "$what" "$name" format="$what" 2>/dev/null) ]] || sacctmgr -i add "$what" "$name" "$@" >/dev/null
}

node_idle() { [[ $(sinfo -h -n "$NODE" -o %T 2>/dev/null) == idle* ]]; }

all_alive() { local d; for d in mariadb slurmdbd slurmctld slurmd; do alive "$d" || return 1; done; }

cmd_start() {
  [[ $(id -u) -eq 0 ]] || die "run as root (the daemons run as root here)"
  command -v slurmctld >/dev/null || die "SLURM is not installed: run '$0 install' first"
  if all_alive && munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
    link_default_conf
    echo "cluster already running (state in $DIR)"
    cmd_env
    return 0
  fi
  link_default_conf
  write_config
  start_munge
  start_mariadb
  start_slurm_daemon slurmdbd
  wait_until slurmdbd 30 "$(cat "$(pidfile slurmdbd)")" sacctmgr -n show cluster
  # the cluster must be known before slurmctld registers; the association lets root submit with -A dse
  sacctmgr_add cluster dse
  sacctmgr_add account dse cluster=dse description=dse organization=dse
  [[ -n $(sacctmgr -n -P show assoc user=root account=dse format=user) ]] \
    || sacctmgr -i add user root account=dse cluster=dse >/dev/null
  # root starts out in account root: make dse its default, so jobs without -A land in dse too
  [[ $(sacctmgr -n -P show user root format=defaultaccount) == dse ]] \
    || sacctmgr -i modify user root set defaultaccount=dse >/dev/null
  start_slurm_daemon slurmctld
  start_slurm_daemon slurmd
  for _ in $(seq 120); do node_idle && break; sleep 0.5; done
  node_idle || die "node $NODE not idle after 60 s ($(sinfo -h -n "$NODE" -o %T 2>&1)); see $DIR/log/slurmctld.log and $DIR/log/slurmd.log"
  echo "cluster dse up: node $NODE, partition debug, account dse (state in $DIR)"
  cmd_env
}

stop_daemon() {  # stop_daemon NAME: TERM by pid file, then wait for the process to go
  local f pid; f=$(pidfile "$1")
  [[ -s $f ]] || return 0
  pid=$(cat "$f")
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid"
    for _ in $(seq 120); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    if kill -0 "$pid" 2>/dev/null; then
      echo "cluster.sh: $1 ($pid) ignored TERM for 30 s, killing it" >&2
      kill -9 "$pid" 2>/dev/null || true
    fi
    echo "stopped $1"
  fi
  rm -f "$f"
}

cmd_stop() {
  local d
  for d in slurmd slurmctld slurmdbd mariadb munged; do stop_daemon "$d"; done
  if [[ $(readlink "$DEFAULT_CONF" 2>/dev/null) == "$CONF" ]]; then rm -f "$DEFAULT_CONF"; fi
}

cmd_status() {
  local d
  for d in munged mariadb slurmdbd slurmctld slurmd; do
    if alive "$d"; then echo "$d: running (pid $(cat "$(pidfile "$d")"))"; else echo "$d: not running"; fi
  done
  if alive slurmctld; then
    sinfo
    scontrol show node "$NODE" | grep -E 'Gres|AllocTRES|State='
  fi
}

cmd_env() { echo "export SLURM_CONF=$CONF"; }

case ${1:-} in
  install) cmd_install ;;
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  env) cmd_env ;;
  *) echo "usage: $0 install|start|stop|status|env" >&2; exit 2 ;;
esac
