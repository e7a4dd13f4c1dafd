# The Vagrantfile's host code (tools/vagrant/lab_host.rb) as it runs on a learner's Linux, macOS or Windows
# machine: every test runs it under each host's RbConfig host_os and its path rules, with every way of running a
# host command (system, backticks, spawn, Open3) made to fail, so that a call no Windows or macOS host has would
# show. Run by tests/unit/test_vagrant_host_code.py (plain `ruby tests/ruby/test_lab_host.rb` works too).
require "minitest/autorun"
require "open3"
require "openssl"
require "tmpdir"
require_relative "../../tools/vagrant/lab_host"

HOSTS = { windows: "mingw32", macos: "darwin23.6.0", linux: "linux-gnu" }.freeze

# Any host command fails the test: the host code must be Ruby alone.
module NoHostCommands
  def self.refuse(*args)
    raise "the host code ran a host command: #{args.inspect}"
  end
end

class Minitest::Test
  def with_host(os)
    saved = RbConfig::CONFIG["host_os"]
    RbConfig::CONFIG["host_os"] = HOSTS.fetch(os)
    originals = { Kernel => %i[system ` spawn exec], Open3.singleton_class => %i[capture3 capture2 popen3] }
    hidden = []
    originals.each do |owner, names|
      names.each do |name|
        target = owner == Kernel ? Object : owner
        target.send(:alias_method, :"lab_saved_#{name}", name) if target.method_defined?(name, true) || target.private_method_defined?(name)
        target.send(:define_method, name) { |*args, **_kw| NoHostCommands.refuse(name, *args) }
        hidden << [target, name]
      end
    end
    yield
  ensure
    hidden&.each do |target, name|
      target.send(:alias_method, name, :"lab_saved_#{name}") if target.method_defined?(:"lab_saved_#{name}", true)
    end
    RbConfig::CONFIG["host_os"] = saved
  end
end

class TestLabHost < Minitest::Test
  def test_the_host_os_is_read_from_rbconfig
    assert_equal :windows, LabHost.host_os("mingw32")
    assert_equal :windows, LabHost.host_os("mswin64_140")
    assert_equal :macos, LabHost.host_os("darwin23.6.0")
    assert_equal :linux, LabHost.host_os("linux-gnu")
    HOSTS.each { |os, name| with_host(os) { assert_equal os, LabHost.host_os } && name }
  end

  def test_the_virtualenv_python_is_found_where_each_host_puts_it
    Dir.mktmpdir do |root|
      { windows: %w[.venv Scripts python.exe], macos: %w[.venv bin python], linux: %w[.venv bin python] }
        .each do |os, parts|
        with_host(os) do
          assert_equal(os == :windows ? "python" : "python3", LabHost.python(root))
          path = File.join(root, *parts)
          FileUtils.mkdir_p(File.dirname(path))
          File.write(path, "")
          assert_equal path, LabHost.python(root)
          FileUtils.rm_rf(File.join(root, ".venv"))
        end
      end
    end
  end

  # The private key file, decoded as OpenSSH does: its magic, no cipher, one key, the same public key as the .pub
  # line, and a secret whose seed signs what the public key verifies.
  def parse(pem)
    body = Base64.decode64(pem.lines[1..-2].join)
    assert body.start_with?("openssh-key-v1\0")
    fields = []
    rest = body.byteslice(15..)
    3.times do
      len = rest.unpack1("N")
      fields << rest.byteslice(4, len)
      rest = rest.byteslice(4 + len..)
    end
    assert_equal %w[none none], fields[0, 2]
    assert_equal 1, rest.unpack1("N")
    rest = rest.byteslice(4..)
    blob_len = rest.unpack1("N")
    blob = rest.byteslice(4, blob_len)
    rest = rest.byteslice(4 + blob_len..)
    secret = rest.byteslice(4, rest.unpack1("N"))
    assert_equal 0, secret.bytesize % 8, "the secret section is padded to the block size"
    assert_equal secret.byteslice(0, 4), secret.byteslice(4, 4), "the two check numbers match"
    [blob, secret]
  end

  def test_a_new_key_pair_is_a_working_openssh_ed25519_key
    pem, line = LabHost.ssh_keypair("k8s-arch-lab")
    type, encoded, comment = line.split
    assert_equal %w[ssh-ed25519 k8s-arch-lab], [type, comment]
    blob, secret = parse(pem)
    assert_equal Base64.strict_decode64(encoded), blob
    pub = blob.byteslice(-32..)
    assert_includes secret, LabHost.ssh_string(pub)
    keypart = secret.byteslice(8 + blob.bytesize + 4, 64)
    seed = keypart.byteslice(0, 32)
    assert_equal pub, keypart.byteslice(32, 32)
    private_key = OpenSSL::PKey.read(["302e020100300506032b657004220420"].pack("H*") + seed)
    public_key = OpenSSL::PKey.read(["302a300506032b6570032100"].pack("H*") + pub)
    signature = private_key.sign(nil, "message")
    assert public_key.verify(nil, signature, "message"), "the seed in the file signs for the public key"
  end

  def test_the_key_is_made_once_for_its_owner_only_on_every_host
    HOSTS.each_key do |os|
      Dir.mktmpdir do |dir|
        path = File.join(dir, "state", "ssh", "id_ed25519")
        first = with_host(os) { LabHost.ensure_ssh_key(path) }
        assert_match(/\Assh-ed25519 \S+ k8s-arch-lab\z/, first)
        assert_equal first, with_host(os) { LabHost.ensure_ssh_key(path) }, "a second run keeps the key"
        next if LabHost.host_os(RbConfig::CONFIG["host_os"]) == :windows # (modes do not exist there)

        assert_equal 0o600, File.stat(path).mode & 0o777
        assert_equal 0o700, File.stat(File.dirname(path)).mode & 0o777
        assert_equal 0o700, File.stat(File.dirname(path, 2)).mode & 0o777
      end
    end
  end

  def test_an_existing_state_folder_keeps_its_mode
    Dir.mktmpdir do |dir|
      File.chmod(0o755, dir)
      with_host(:linux) { LabHost.ensure_ssh_key(File.join(dir, "ssh", "id_ed25519")) }
      assert_equal 0o755, File.stat(dir).mode & 0o777
    end
  end

  def test_a_host_command_would_be_seen
    with_host(:windows) { assert_raises(RuntimeError) { system("ssh-keygen") } }
    with_host(:macos) { assert_raises(RuntimeError) { Open3.capture3("ssh-keygen") } }
  end
end
